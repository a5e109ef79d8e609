#!/usr/bin/env bash
# tests/sock_priv.sh — programs under `ntbx run` that drop privileges stay
# on the fabric, and forked children reuse their parent's fabric handle
# (issue 12 items 4 and 9).  A Python server that binds as root and then
# becomes nobody (serving itself, then with a forked child per
# connection); nginx with the Debian default `user www-data;` and worker
# processes, fetched by curl; a client that forks a child per connection.
# Each checks the bytes, the path (NTBX_LOG=info close lines) and that
# nobody said "stay on kernel TCP"; the fabric directory stays 0700.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_priv

FAB="$NTBX_SHM_DIR/ntbx-default"
said_tcp() { grep -h "stay on kernel TCP" "$@" 2>/dev/null | head -2 || true; }

chmod 711 "$WORK"
mkdir -m 1777 "$WORK/rdy"   # the servers say "ready" as nobody

# 1-2. Python: bind as root, setuid to nobody, serve (itself / forked children)
for mode in self fork; do
	P=$(free_port)
	bg "$PY" "$HERE/sock/priv.py" server "$P" "$WORK/rdy/$mode" nobody $mode \
		2>"$WORK/$mode.srv" &
	PIDS+=($!)
	wait_file "$WORK/rdy/$mode" || bad "$mode: the server never listened"
	st=0
	run "$PY" "$HERE/sock/priv.py" client "$P" 5 100000 >"$WORK/$mode.out" \
		2>"$WORK/$mode.cli" || st=$?
	fb=$(fabric_bytes "$WORK/$mode.cli" || true)
	sfb=$(fabric_bytes "$WORK/$mode.srv" || true)
	why=$(said_tcp "$WORK/$mode.srv" "$WORK/$mode.cli")
	if [ "$st" -eq 0 ] && [ "${fb:-0}" = 500000 ] && [ "${sfb:-0}" = 500000 ] && [ -z "$why" ]; then
		ok "python server as nobody ($mode): 5 x 100000 bytes echoed, on the fabric both ends"
	else
		bad "python server as nobody ($mode): status $st, client fabric bytes $fb, server $sfb: $why $(cat "$WORK/$mode.out"; tail -n3 "$WORK/$mode.srv")"
	fi
done

# 3. A client that forks a child per connection (fork, connect, 64 B, exit)
P=$(free_port)
bg "$PY" "$HERE/sock/echo.py" server "$P" "$WORK/fc.ready" 2>"$WORK/fc.srv" &
PIDS+=($!)
wait_file "$WORK/fc.ready" || bad "forkclient: the server never listened"
st=0
run "$PY" "$HERE/sock/priv.py" forkclient "$P" 50 >"$WORK/fc.out" 2>"$WORK/fc.cli" || st=$?
n=$(grep -c 'path fabric, 64 bytes out, 64 bytes in' "$WORK/fc.cli" || true)
joins=$(grep -c 'comes up' "$WORK/fc.cli" || true)
if [ "$st" -eq 0 ] && [ "$n" -eq 50 ] && [ -z "$(said_tcp "$WORK/fc.cli")" ]; then
	ok "forking client: 50 children on the fabric, $(sed -n 's/^ok forkclient //p' "$WORK/fc.out")"
else
	bad "forking client: status $st, $n of 50 on the fabric: $(cat "$WORK/fc.out"; tail -n3 "$WORK/fc.cli")"
fi

# 4. nginx, Debian default user (www-data), 2 workers, curl
if command -v nginx >/dev/null; then
	mkdir -p "$WORK/www"
	head -c 2000000 /dev/urandom >"$WORK/www/big.bin"
	head -c 1024 /dev/urandom >"$WORK/www/small.bin"
	chmod -R a+rX "$WORK/www"
	P=$(free_port)
	cat >"$WORK/nginx.conf" <<CONF
user www-data;
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
env NTBX_SHM_DIR;
env NTBX_LOG;
events { worker_connections 256; }
http {
	access_log off;
	sendfile on;
	server { listen 127.0.0.1:$P; root $WORK/www; }
}
CONF
	bg nginx -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" 2>"$WORK/nginx.err" &
	NP=$!
	PIDS+=($NP)
	wait_port "$P" || bad "nginx did not listen"
	okc=0
	for f in big.bin small.bin big.bin small.bin; do
		http_get "http://127.0.0.1:$P/$f" "$WORK/got" 2>>"$WORK/curl.err" || true
		cmp -s "$WORK/got" "$WORK/www/$f" && okc=$((okc + 1))
	done
	fab=$(grep -c 'path fabric' "$WORK/curl.err" || true)
	users=$(ps -o user= --ppid "$NP" | sort -u | tr '\n' ' ')
	why=$(said_tcp "$WORK/nginx.err" "$WORK/nginx-error.log" "$WORK/curl.err")
	if [ "$okc" -eq 4 ] && [ "$fab" -eq 4 ] && [ "$users" = "www-data " ] && [ -z "$why" ]; then
		ok "nginx (user www-data, 2 workers): 4 files fetched by $HTTP_CLIENT, equal, on the fabric"
	else
		bad "nginx as www-data: $okc/4 equal, $fab on the fabric, workers '$users': $why $(tail -n3 "$WORK/nginx.err" "$WORK/nginx-error.log")"
	fi
	kill -QUIT "$NP" 2>/dev/null || true
	gone "$NP" || { pkill -9 -P "$NP" 2>/dev/null; kill -9 "$NP" 2>/dev/null; } || true
else
	echo "skip nginx: not installed (scripts/deps.sh sock)"
fi

# The fabric stayed its owner's alone.
mode=$(stat -c %a "$FAB")
[ "$mode" = 700 ] && ok "fabric directory still mode 700" || bad "fabric directory mode $mode"
others=$(find "$FAB" ! -user root 2>/dev/null | head -3)
[ -z "$others" ] || bad "files of other users in the fabric: $others"

echo "sock_priv: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
