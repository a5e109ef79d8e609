#!/usr/bin/env bash
# tests/sock_forklisten.sh — a fork-per-connection server's listener
# registration: each child closes the listener it inherited, which must not
# unregister it (every connection after the first children ended is still
# on the fabric), and the server's own close must (its row leaves
# `ntbx stat --json` while the server still runs).  A child never owns a
# registration, so its close does not look (listen.c, g_listen_pid).
# tests/sock/forkserve.py against tests/sock/forkclient.py.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_forklisten

N=12
P=$(free_port)
listens() { "$NTBX" stat --json | grep -c '"kind":"listen"' || true; }
run "$PY" "$HERE/sock/forkserve.py" "$P" "$N" "$WORK/ready" "$WORK/closed" "$WORK/go" \
	>"$WORK/srv.out" 2>"$WORK/srv.err" &
S=$!
PIDS+=($S)
wait_file "$WORK/ready" || bad "the server never listened"
[ "$(listens)" = 1 ] && ok "the listener is registered" ||
	bad "listener rows before the clients: $(listens)"
st=0
run "$PY" "$HERE/sock/forkclient.py" "$P" "$N" >"$WORK/cli.out" 2>"$WORK/cli.err" || st=$?
nfab=$(grep -c 'closed: path fabric, 64 bytes out, 64 bytes in' "$WORK/cli.err" || true)
if [ "$st" -eq 0 ] && grep -q "^ok forkclient $N" "$WORK/cli.out" && [ "$nfab" = "$N" ]; then
	ok "$N connections answered, each on the fabric, 64 bytes each way"
else
	bad "client status $st, $nfab of $N on the fabric: $(cat "$WORK/cli.out"; tail -3 "$WORK/cli.err")"
fi
wait_file "$WORK/closed" || bad "the server never closed its listener"
kill -0 "$S" 2>/dev/null || bad "the server ended before the check"
[ "$(listens)" = 0 ] && ok "the server's own close unregistered it" ||
	bad "listener rows after the server's close: $(listens)"
touch "$WORK/go"
st=0
wait "$S" || st=$?
[ "$st" -eq 0 ] && grep -q "^ok forkserve $N" "$WORK/srv.out" && ok "server ended" ||
	bad "server status $st: $(cat "$WORK/srv.out"; tail -3 "$WORK/srv.err")"

echo "sock_forklisten: $pass passed, $fail failed"
leaks=$(ls "$NTBX_SHM_DIR" 2>/dev/null | grep -v '^ntbx-default$' || true)
[ -z "$leaks" ] || { echo "FAIL stray files in $NTBX_SHM_DIR: $leaks"; fail=$((fail+1)); }
[ "$fail" -eq 0 ]
