#!/usr/bin/env bash
# tests/sock_flags.sh — descriptor flags of fabric sockets under `ntbx run`:
# O_NONBLOCK set and cleared by fcntl and ioctl(FIONBIO), in the process and
# in a forked child sharing the open file description (tests/sock/nonblock.py).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_flags

# (NTBX_LOG=debug: the children exit without closing, so the connection's
# close-time "path" line never comes; the accept line says where it went)
if NTBX_LOG=debug timeout 120 "$NTBX" run -- "$PY" "$HERE/sock/nonblock.py" "$(free_port)" \
	>"$WORK/nb.out" 2>"$WORK/nb.err" &&
   grep -q "^ok nonblock" "$WORK/nb.out" && grep -q "accepted .* on the fabric" "$WORK/nb.err"; then
	ok "O_NONBLOCK follows fcntl, FIONBIO and a forked child, on the fabric"
else
	bad "nonblock: $(grep -v '^ok' "$WORK/nb.out" | tail -5; tail -3 "$WORK/nb.err")"
fi
echo "sock_flags: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
