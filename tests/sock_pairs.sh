#!/usr/bin/env bash
# tests/sock_pairs.sh — more ping-pong pairs than CPUs (issue 16): twice as
# many pairs as this process may use CPUs, at least 4, all at once under
# `ntbx run`, waiting by blocking recv, poll and epoll in turn; once with
# the default wait policy (NTBX_SPIN_US unset), once with NTBX_SPIN_US=0.
# A starvation check, not a timing assertion: every pair must complete all
# its round trips, none of them slower than LIMIT ms (a waiter that keeps
# the CPU from the peer it waits for, or a lost wake-up, shows as a round
# trip of a time slice or of the preload's 1 s sleep cap), every
# connection on the fabric.
# tests/sock/pingpong.py.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_pairs

NCPU=$(nproc)
NP=$((2 * NCPU)); [ $NP -ge 4 ] || NP=4
ROUNDS=${PAIRS_ROUNDS:-30000} LIMIT=1000
modes=(block poll epoll)
# The wait policy as a user gets it (NTBX_SPIN_US unset), then with every
# wait a sleep (NTBX_SPIN_US=0: a lost wake-up shows as a 1 s round trip).
for spin in policy 0; do
	if [ $spin = policy ]; then unset NTBX_SPIN_US; else export NTBX_SPIN_US=$spin; fi
	ports=() spids=() cpids=()
	for i in $(seq $NP); do
		P=$(free_port); ports+=("$P")
		rm -f "$WORK/ready$i"
		bg "$PY" "$HERE/sock/pingpong.py" server "$P" "$WORK/ready$i" 2>"$WORK/srv$i.err" &
		spids+=($!)
		PIDS+=($!)
	done
	for i in $(seq $NP); do
		wait_file "$WORK/ready$i" || bad "spin $spin, pair $i: server did not start"
	done
	for i in $(seq $NP); do
		run "$PY" "$HERE/sock/pingpong.py" client "${ports[i-1]}" $ROUNDS \
			"${modes[(i - 1) % 3]}" $LIMIT >"$WORK/cli$i.out" 2>"$WORK/cli$i.err" &
		cpids+=($!)
		PIDS+=($!)
	done
	for i in $(seq $NP); do
		st=0
		wait "${cpids[i-1]}" || st=$?
		fab=$(grep -c 'path fabric' "$WORK/cli$i.err" || true)
		if [ $st -eq 0 ] && grep -q '^ok client' "$WORK/cli$i.out" && [ "$fab" -ge 1 ]; then
			ok "NTBX_SPIN_US=${spin/policy/unset}, pair $i of $NP on $NCPU CPUs: $(sed -n 's/^ok //p' "$WORK/cli$i.out")"
		else
			bad "NTBX_SPIN_US=${spin/policy/unset}, pair $i of $NP: status $st, fabric $fab: $(head -n2 "$WORK/cli$i.out"; grep -v 'comes up' "$WORK/cli$i.err" | tail -3)"
		fi
	done
	for p in "${spids[@]}"; do wait "$p" 2>/dev/null || true; done
done

echo "sock_pairs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
