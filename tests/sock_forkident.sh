#!/usr/bin/env bash
# tests/sock_forkident.sh — a joined process's forked child takes its
# identity on the fabric (lock description, waiter slot) at its first use
# of the fabric, not in the fork handler (src/sock/self.c, sk_fab; shm.c,
# ntbx_dev_fork_identity): one that never uses it takes no slot, one that
# does gets one and its connection is on the fabric, a sandboxed one
# (RLIMIT_NOFILE lowered) takes none and its connection works on kernel
# TCP.  The slots are counted from /proc/locks (tests/sock/forkident.py).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_forkident

P=$(free_port)
LIVE="$NTBX_SHM_DIR/ntbx-default/node-0.live"
st=0
run "$PY" "$HERE/sock/forkident.py" "$P" "$LIVE" >"$WORK/out" 2>"$WORK/err" || st=$?
cat "$WORK/out"
pass=$((pass + $(grep -c '^ok ' "$WORK/out" || true)))
fail=$((fail + $(grep -c '^FAIL ' "$WORK/out" || true)))
[ "$st" -eq 0 ] && [ "$(grep -c '^ok ' "$WORK/out" || true)" = 8 ] && ok "every check ran" ||
	bad "status $st: $(tail -3 "$WORK/err")"
# of the two accepted connections, only B's was on the fabric
nfab=$(grep -c 'closed: path fabric, 64 bytes out, 64 bytes in' "$WORK/err" || true)
[ "$nfab" = 2 ] && ok "B's connection was on the fabric (both ends), C's was not" ||
	bad "$nfab connection ends closed on the fabric (want 2: B's): $(grep 'closed: path' "$WORK/err" | head -4)"

echo "sock_forkident: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
