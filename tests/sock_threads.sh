#!/usr/bin/env bash
# tests/sock_threads.sh — many event loops in one process (issue 12 item 1).
# A server whose worker threads each run their own epoll (then poll) loop
# over their own connections, and a client whose threads do the same, both
# under `ntbx run` with NTBX_SPIN_US=0, so that every wait is a sleep and
# every exchange needs its wake-up to reach the right thread.  Every thread
# must finish all its exchanges, each under 500 ms (a lost wake-up sleeps
# to the preload's 1 s cap, or hangs), every connection on the fabric.
# Then the same with the wait policy as a user gets it (NTBX_SPIN_US
# unset): 8 client threads and 4 workers outnumber the CPUs, so the waits
# are crowded (spin.c); a waiter that kept its CPU from the thread it
# waits for shows as a slow exchange (a starvation check, not a timing
# assertion).
# tests/sock/threads.py.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_threads

NT=8 NC=2 ROUNDS=500 LIMIT=500
for spin in 0 policy; do
	if [ $spin = policy ]; then unset NTBX_SPIN_US; else export NTBX_SPIN_US=$spin; fi
	for mode in epoll poll; do
		P=$(free_port)
		rm -f "$WORK/ready"
		bg "$PY" "$HERE/sock/threads.py" server "$P" "$WORK/ready" 4 "$mode" 2>"$WORK/srv-$mode.err" &
		SP=$!
		PIDS+=($SP)
		wait_file "$WORK/ready" || bad "$mode: server did not start"
		st=0
		run "$PY" "$HERE/sock/threads.py" client "$P" $NT $NC $ROUNDS "$mode" $LIMIT \
			>"$WORK/cli-$mode.out" 2>"$WORK/cli-$mode.err" || st=$?
		fab=$(grep -c 'path fabric' "$WORK/cli-$mode.err" || true)
		if [ "$st" -eq 0 ] && grep -q "^ok client" "$WORK/cli-$mode.out" &&
		   [ "$fab" -eq $((NT * NC)) ]; then
			ok "NTBX_SPIN_US=${spin/policy/unset}, $mode: $(sed -n 's/^ok client //p' "$WORK/cli-$mode.out"), $fab connections on the fabric"
		else
			bad "NTBX_SPIN_US=${spin/policy/unset}, $mode: status $st, $fab of $((NT * NC)) on the fabric: $(head -n3 "$WORK/cli-$mode.out"; grep -v 'comes up' "$WORK/cli-$mode.err" | tail -3)"
		fi
		kill "$SP" 2>/dev/null || true
		wait "$SP" 2>/dev/null || true
	done
done

echo "sock_threads: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
