#!/usr/bin/env bash
# tests/sock_handover.sh — slot hand-over is generation-checked (issue 12
# item 5): a request reaped and claimed again between an acceptor's look
# and its compare-and-swap is never written by that acceptor.  The
# take-over is made at a fixed point by tests/sock/handover.c (built here,
# loaded after the preload); tests/sock/handover.py checks the slot, the
# bytes, and that the next connection is on the fabric.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_handover

ROOT=$(cd "$HERE/.." && pwd)
cc -O1 -Wall -shared -fPIC -I"$ROOT/include" -I"$ROOT/src" \
	-o "$WORK/handover.so" "$HERE/sock/handover.c" -ldl ||
	{ bad "cannot build handover.c"; exit 1; }
"$NTBX" fabric create default --nodes 2 >/dev/null

st=0
# (the sanitized ntbx itself starts with handover.so preloaded, before its
# ASan runtime; what it runs gets the runtime first again)
[ "${NTBX_SANITIZED:-0}" = 1 ] && export ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0"
LD_PRELOAD="$WORK/handover.so" HANDOVER_STEAL=1 run "$PY" "$HERE/sock/handover.py" \
	>"$WORK/out" 2>"$WORK/err" || st=$?
while read -r line; do
	case $line in
	ok*) ok "${line#ok }" ;;
	*) bad "${line#FAIL }" ;;
	esac
done <"$WORK/out"
[ "$st" -eq 0 ] || bad "status $st: $(grep -v 'comes up' "$WORK/err" | tail -3)"
# the first connection closed on TCP on both ends, the second on the fabric
nfab=$(grep -c 'closed: path fabric' "$WORK/err" || true)
[ "$nfab" -eq 2 ] && ok "only the second connection on the fabric (both ends)" ||
	bad "$nfab ends closed on the fabric, want 2: $(grep -v 'comes up' "$WORK/err" | tail -4)"

echo "sock_handover: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
