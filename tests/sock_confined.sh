#!/usr/bin/env bash
# tests/sock_confined.sh — a process confined as sshd's pre-authentication
# child is (RLIMIT_NOFILE 1, then a seccomp filter: tests/sock/confined.c)
# still wakes a peer that sleeps in epoll_wait on its wake FIFO: before
# it confines itself it opens and keeps the FIFOs of its peers' sleepers
# (docs/design-notes.md, "A confined process keeps real wake-ups").  With
# NTBX_SPIN_US=0 every wait of the peer sleeps.  Asserted: every byte of
# 2 x ROUNDS exchanges, both connections on the fabric, the confined side
# alive to the end (not killed by its filter), and in `ntbx stat --json`
# no sleep of the epoll sleeper in 1 ms slices (confined_slices 0) on the
# connection whose sleeper was registered before the confinement, while
# the one whose sleeper came after (a new thread's wake object, which the
# confined side cannot open) still works, in slices (confined_slices > 0).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_confined
[ "$(uname -m)" = x86_64 ] || skip "the seccomp filter of confined.c is for x86_64"

ROOT=$(cd "$HERE/.." && pwd)
cc -O1 -Wall -pthread -o "$WORK/confined" "$HERE/sock/confined.c" ||
	{ bad "cannot build confined.c"; exit 1; }
P=$(free_port)
ROUNDS=300
st=0
NTBX_SPIN_US=0 NTBX_BIN="$NTBX" run "$WORK/confined" "$P" "$ROUNDS" "$WORK/stat" \
	>"$WORK/out" 2>"$WORK/err" || st=$?
why=$(grep -h "stay on kernel TCP" "$WORK/err" | head -n2 || true)
if [ "$st" -eq 0 ] && grep -q "peer ok: $ROUNDS rounds" "$WORK/out" && [ -z "$why" ]; then
	ok "confined side and its epoll/poll peer: $ROUNDS rounds on each of 2 connections, bytes exact"
else
	bad "status $st: $(cat "$WORK/out") $why $(grep -v 'comes up' "$WORK/err" | tail -n4)"
fi
# the two connections, told apart by the bytes the child sent: 2 + 64 x
# ROUNDS on connection 1 (the byte before its sleep), 1 + 64 x ROUNDS on 2
rows=$(grep '"kind":"conn"' "$WORK/stat" 2>/dev/null | grep ":$P\"" || true)
n=$(printf '%s\n' "$rows" | grep -c '"path":"fabric"' || true)
slices() { printf '%s\n' "$rows" | grep "\"bytes_cl\":$1," |
	grep -o '"confined_slices":[0-9]*' | cut -d: -f2 || true; }
s1=$(slices $((2 + 64 * ROUNDS)))
s2=$(slices $((1 + 64 * ROUNDS)))
read -r _ z1 z2 < <(grep '^slept ' "$WORK/out" || echo "slept 0 0")
if [ "$n" = 2 ] && [ "$s1" = 0 ] && [ "$z1" -gt 0 ]; then
	ok "the epoll sleeper registered before the confinement slept $z1 times, woken by its FIFO each time (confined_slices 0)"
else
	bad "want 2 fabric connections, the epoll sleeper asleep at times ($z1) and never in slices: $rows"
fi
if [ -n "$s2" ] && [ "$z2" -gt 0 ] && [ "$s2" -gt 0 ]; then
	ok "the poll sleeper made after it slept $z2 times, in 1 ms slices ($s2)"
else
	bad "want the poll sleeper asleep at times ($z2) and in slices: $rows"
fi

echo "sock_confined: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
