#!/usr/bin/env bash
# tests/sock_late.sh — a client started before its server: it is refused
# until the server listens, then must connect over the fabric.  First on a
# fresh fabric (no listener has ever registered: the client's first look
# finds no table at all), then with another listener registered (the
# client's cached set of listened ports is stale until the registry's
# generation changes).  tests/sock/late.py, against tests/sock/echo.py.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_late

TAB="$NTBX_SHM_DIR/ntbx-default/sock-v5.tab"
late() { # NAME: a client first, then its server; the client must be on the fabric
	local P C st=0
	P=$(free_port)
	bg "$PY" "$HERE/sock/late.py" "$P" "$WORK/$1.tried" >"$WORK/$1.out" 2>"$WORK/$1.err" &
	C=$!
	PIDS+=($C)
	wait_file "$WORK/$1.tried" || bad "$1: the client never tried"
	[ "$1" != fresh ] || [ ! -e "$TAB" ] || bad "fresh: a table already exists"
	bg "$PY" "$HERE/sock/echo.py" server "$P" "$WORK/$1.ready" 2>"$WORK/$1.srv" &
	PIDS+=($!)
	wait "$C" || st=$?
	if [ "$st" -eq 0 ] && grep -q "^ok late client" "$WORK/$1.out" &&
	   [ "$(fabric_bytes "$WORK/$1.err")" -gt 0 ]; then
		ok "$1: $(sed -n 's/^ok //p' "$WORK/$1.out"), on the fabric"
	else
		bad "$1: status $st: $(cat "$WORK/$1.out"; grep -v 'comes up' "$WORK/$1.err" | tail -3)"
	fi
}
late fresh
late registered

echo "sock_late: $pass passed, $fail failed"
leaks=$(ls "$NTBX_SHM_DIR" 2>/dev/null | grep -v '^ntbx-default$' || true)
[ -z "$leaks" ] || { echo "FAIL stray files in $NTBX_SHM_DIR: $leaks"; fail=$((fail+1)); }
[ "$fail" -eq 0 ]
