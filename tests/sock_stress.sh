#!/usr/bin/env bash
# tests/sock_stress.sh — libntbx-preload.so under load and failure:
# 200 concurrent connections through a selectors (epoll) echo server with
# random-sized checksummed messages; 10,000 connect/close cycles without an
# fd or /dev/shm leak; an accept-and-fork server; SIGKILL of either end
# mid-transfer (the survivor ends, never hangs); nginx with worker
# processes serving files with sendfile on and off, fetched by curl and
# checksummed.  Both ends interposed.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_stress

# 1. 200 concurrent connections, epoll echo server
P=$(free_port)
bg "$PY" "$HERE/sock/stress.py" server "$P" "$WORK/r1" 2>"$WORK/srv1.err" &
SP=$!
PIDS+=($SP)
wait_file "$WORK/r1" || bad "echo server did not start"
if run "$PY" "$HERE/sock/stress.py" many "$P" 200 >"$WORK/many.out" 2>"$WORK/many.err" &&
   grep -q "ok many 200" "$WORK/many.out" &&
   [ "$(grep -c 'path fabric' "$WORK/many.err")" -eq 200 ]; then
	ok "200 concurrent connections, random-sized checksummed messages, all 200 on the fabric"
else
	bad "200 connections: $(tail -n3 "$WORK/many.out" "$WORK/many.err")"
fi

# 2. 10,000 connect / request / reply / close cycles
fd0=$(ls /proc/$SP/fd | wc -l)
if run "$PY" "$HERE/sock/stress.py" cycles "$P" 10000 >"$WORK/cyc.out" 2>"$WORK/cyc.err" &&
   grep -q "ok cycles 10000" "$WORK/cyc.out"; then
	fd1=$(ls /proc/$SP/fd | wc -l)
	files=$(ls "$NTBX_SHM_DIR/ntbx-default" | wc -l)
	if [ "$fd1" -le $((fd0 + 2)) ]; then
		ok "10,000 connect/close cycles: server fds $fd0 -> $fd1, $files files in the fabric directory"
	else
		bad "10,000 cycles leaked descriptors: $fd0 -> $fd1"
	fi
else
	bad "10,000 cycles: $(tail -n3 "$WORK/cyc.out" "$WORK/cyc.err")"
fi
kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null || true

# 3. accept-and-fork server
P=$(free_port)
bg "$PY" "$HERE/sock/stress.py" server "$P" "$WORK/r3" fork 2>"$WORK/srv3.err" &
SP=$!
PIDS+=($SP)
wait_file "$WORK/r3" || bad "fork server did not start"
if run "$PY" "$HERE/sock/echo.py" client "$P" 5000000 >"$WORK/f.out" 2>"$WORK/f.err" &&
   grep -q "^ok 5000000" "$WORK/f.out" && grep -q "path fabric, 5000000 bytes out" "$WORK/f.err"; then
	ok "accept-and-fork server (child serves, parent closes its copy): 5 MB echoed on the fabric"
else
	bad "fork server: $(tail -n3 "$WORK/f.out" "$WORK/f.err")"
fi
kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null || true

# 4. SIGKILL of either end mid-transfer
for victim in writer reader; do
	P=$(free_port)
	rm -f "$WORK/r4" "$WORK/r4.mid"
	bg "$PY" "$HERE/sock/stress.py" sink "$P" "$WORK/r4" >"$WORK/sink.out" 2>/dev/null &
	RP=$!
	PIDS+=($RP)
	wait_file "$WORK/r4" || bad "sink did not start"
	bg "$PY" "$HERE/sock/stress.py" flood "$P" >"$WORK/flood.out" 2>/dev/null &
	WP=$!
	PIDS+=($WP)
	wait_file "$WORK/r4.mid" || bad "no transfer"
	if [ $victim = writer ]; then
		kill -9 "$WP" 2>/dev/null || true
		survivor=$RP
	else
		kill -9 "$RP" 2>/dev/null || true
		survivor=$WP
	fi
	if gone "$survivor"; then
		ok "SIGKILL of the $victim mid-transfer: survivor ended ($(cat "$WORK/sink.out" "$WORK/flood.out" | tr '\n' ' '))"
	else
		bad "SIGKILL of the $victim: the survivor hangs"
	fi
	kill "$RP" "$WP" 2>/dev/null || true
	wait "$RP" "$WP" 2>/dev/null || true
done

# 5. nginx with 2 worker processes, sendfile on and off, curl checksums
if command -v nginx >/dev/null; then
	mkdir -p "$WORK/www"
	head -c 3000000 /dev/urandom >"$WORK/www/big.bin"
	head -c 1024 /dev/urandom >"$WORK/www/small.bin"
	for sf in on off; do
		P=$(free_port)
		cat >"$WORK/nginx.conf" <<CONF
user root;
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
env NTBX_SHM_DIR;
env NTBX_LOG;
events { worker_connections 256; }
http {
    access_log off;
    sendfile $sf;
    client_body_temp_path $WORK/tmp1; proxy_temp_path $WORK/tmp2;
    fastcgi_temp_path $WORK/tmp3; uwsgi_temp_path $WORK/tmp4; scgi_temp_path $WORK/tmp5;
    server { listen 127.0.0.1:$P; root $WORK/www; }
}
CONF
		bg nginx -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" 2>"$WORK/nginx.err" &
		NP=$!
		PIDS+=($NP)
		wait_port "$P" || bad "nginx did not listen"
		okc=0
		for f in big.bin small.bin big.bin; do
			http_get "http://127.0.0.1:$P/$f" "$WORK/got" 2>>"$WORK/curl.err" || true
			cmp -s "$WORK/got" "$WORK/www/$f" && okc=$((okc + 1))
		done
		fab=$(grep -c "path fabric" "$WORK/curl.err" || true)
		rm -f "$WORK/curl.err"
		if [ "$okc" -eq 3 ] && [ "$fab" -ge 3 ]; then
			ok "nginx (2 workers, sendfile $sf): 3 files fetched by $HTTP_CLIENT, checksums equal, on the fabric"
		else
			bad "nginx sendfile $sf: $okc/3 files equal, $fab fabric connections; $(tail -n3 "$WORK/nginx.err" "$WORK/nginx-error.log")"
		fi
		kill -QUIT "$NP" 2>/dev/null || true
		gone "$NP" || { pkill -9 -P "$NP" 2>/dev/null; kill -9 "$NP" 2>/dev/null; } || true
		wait "$NP" 2>/dev/null || true
	done
fi

echo "sock_stress: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
