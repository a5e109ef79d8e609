#!/usr/bin/env bash
# tests/sock_fdpass.sh — an accepted fabric socket passed with SCM_RIGHTS
# to an unrelated process (the holder, started apart), the sender closing
# its copy before the holder receives it: the client's bytes are echoed by
# the holder over the fabric, and the client reads EOF when the holder
# closes (tests/sock/fdpass.py).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_fdpass

P=$(free_port)
U=$WORK/pass.sock
F=$WORK/closed
bg "$PY" "$HERE/sock/fdpass.py" holder "$U" "$F" >"$WORK/h.out" 2>"$WORK/h.err" &
H=$!
PIDS+=($H)
wait_file "$U" || bad "holder did not start"
bg "$PY" "$HERE/sock/fdpass.py" server "$P" "$U" "$F" >"$WORK/s.out" 2>"$WORK/s.err" &
PIDS+=($!)
wait_file "$F.listening" || bad "server did not start"
if run "$PY" "$HERE/sock/fdpass.py" client "$P" 2000 >"$WORK/c.out" 2>"$WORK/c.err" &&
   grep -q "^ok client" "$WORK/c.out"; then
	ok "client echoed 2000 messages through the holder, then EOF"
else
	bad "client: $(cat "$WORK/c.out" "$WORK/c.err" | tail -3)"
fi
wait "$H" || true
if grep -q "^ok holder 128000" "$WORK/h.out" &&
   [ "$(fabric_bytes "$WORK/h.err")" -eq 128000 ]; then
	ok "the holder moved all 128000 bytes on the fabric"
else
	bad "holder: $(cat "$WORK/h.out"; tail -3 "$WORK/h.err")"
fi
grep -q "path fabric" "$WORK/c.err" && ok "the client's connection stayed on the fabric" ||
	bad "client path: $(tail -3 "$WORK/c.err")"

echo "sock_fdpass: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
