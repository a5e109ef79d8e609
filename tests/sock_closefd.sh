#!/usr/bin/env bash
# tests/sock_closefd.sh — fabric sockets closed behind the preload's back:
# by syscall(SYS_close) (libuv), close_range (os.closerange), closefrom, and
# by a close the preload cannot see at all (libc's own syscall()).  A new
# socket that gets the same number must behave as a fresh one
# (tests/sock/closefd.py; each also on kernel TCP).  Then a Node.js HTTP
# client without keep-alive makes 20 requests to a Node.js server, both
# under ntbx run: every request answered, every connection on the fabric,
# and no connection left in `ntbx stat` while the server still runs.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_closefd

for how in syscall closerange closefrom raw; do
	if ! NTBX_SOCK=off timeout 60 "$PY" "$HERE/sock/closefd.py" "$how" "$(free_port)" \
		>"$WORK/$how.tcp" 2>&1; then
		bad "$how on kernel TCP (the expectation is wrong): $(tail -3 "$WORK/$how.tcp")"
		continue
	fi
	# the closed one, the fresh pair and the old peer: 4 fabric closes
	if run "$PY" "$HERE/sock/closefd.py" "$how" "$(free_port)" >"$WORK/$how.out" 2>"$WORK/$how.err" &&
	   n=$(grep -c "path fabric" "$WORK/$how.err" || true) && [ "$n" -ge 4 ]; then
		ok "$(sed -n 's/^ok //p' "$WORK/$how.out") ($n fabric closes)"
	else
		bad "$how: $(tail -3 "$WORK/$how.out"; grep -v "^ntbx\[.*info\|comes up" "$WORK/$how.err" | tail -5)"
	fi
done

if command -v node >/dev/null; then
	P=$(free_port)
	bg node "$HERE/sock/node_http.js" server "$P" "$WORK/node.ready" \
		>"$WORK/ns.out" 2>"$WORK/ns.err" &
	NS=$!
	PIDS+=($NS)
	wait_file "$WORK/node.ready" || bad "node server did not start"
	if run node "$HERE/sock/node_http.js" client "$P" 20 >"$WORK/nc.out" 2>"$WORK/nc.err" &&
	   grep -q "^ok node client: 20" "$WORK/nc.out" &&
	   [ "$(grep -c "path fabric" "$WORK/nc.err" || true)" -eq 20 ]; then
		ok "node http client, no keep-alive: 20 requests, 20 connections on the fabric"
	else
		bad "node client: $(cat "$WORK/nc.out"; grep -v "^ntbx\[.*info\|comes up" "$WORK/nc.err" | tail -5)"
	fi
	# the server closed each connection with syscall(SYS_close): no row left
	rows=$("$NTBX" stat --json | grep -c '"kind":"conn"' || true)
	n=$(grep -c "path fabric" "$WORK/ns.err" || true)
	if [ "$rows" -eq 0 ] && [ "$n" -eq 20 ]; then
		ok "node server released all 20 connections ($n fabric closes, no row left)"
	else
		bad "node server: $rows rows left, $n fabric closes: $("$NTBX" stat 2>&1 | head -5)"
	fi
	kill "$NS"
	wait "$NS" 2>/dev/null || true
else
	bad "node is not installed (scripts/deps.d/sock.txt lists nodejs)"
fi

echo "sock_closefd: $pass passed, $fail failed"
leaks=$(ls "$NTBX_SHM_DIR" 2>/dev/null | grep -v '^ntbx-default$' || true)
[ -z "$leaks" ] || { echo "FAIL stray files in $NTBX_SHM_DIR: $leaks"; fail=$((fail+1)); }
[ "$fail" -eq 0 ]
