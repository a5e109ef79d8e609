#!/usr/bin/env bash
# The OpenSHMEM ring's ways to a PE that is not a neighbour (shmem_ring.c),
# with tests/shmem/relay.c (puts, gets, atomics to 1, 2 and 3 hops away,
# every byte checked): on 5 PEs with the relay (two hops through the node
# in between), with the relay off (forwarded queue pairs), with every wait
# sleeping at once (NTBX_SPIN_US=0: a lost wake-up hangs, the oshrun
# timeout fails it), with one transfer thread and with 4, and on 7 PEs,
# where 3 hops go forwarded and 2 relayed at once.  The relays' progress
# threads follow the wait policy's yields (shmem_signal.c,
# ntbx_sh_idle_yield): on one CPU (taskset), with no foreign load
# (injected: NTBX_SPIN_TEST_FOREIGN=0) some of their waits yield; with a
# foreign thread, NTBX_SHMEM_YIELD=0 or NTBX_SPIN_US set none does (the
# counts NTBX_LOG=debug prints at shmem_finalize).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${NTBX_TEST_BIN:?set NTBX_TEST_BIN to the build bin directory}
work=$(mktemp -d /tmp/ntbx-shmem-relay.XXXXXX)
export NTBX_SHM_DIR
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-test-relay-XXXXXX)
trap 'rm -rf "$work" "$NTBX_SHM_DIR"' EXIT
export SHMEM_SYMMETRIC_SIZE=32M
"$BIN/oshcc" -O1 -g -Wall -Wextra -Werror -I"$here/shmem" -o "$work/relay" \
	"$here/shmem/relay.c" || exit 1
pass=0 fail=0
pre=()   # a command the runs go through (taskset)
run() {   # NAME ENV... -- OSHRUN-ARGS...
	local name=$1; shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	if env "${envs[@]}" ${pre[@]+"${pre[@]}"} "$BIN/oshrun" --timeout 120 --topology ring "$@" \
		"$work/relay" >"$work/out" 2>&1 && grep -q '^PASS' "$work/out"; then
		echo "ok   $name"; pass=$((pass + 1))
	else
		echo "FAIL $name"; tail -20 "$work/out"; fail=$((fail + 1))
		return 1
	fi
}
# idle_yields: the sum of the progress threads' yielded waits over the PEs
# of the last run, or "none" if no PE reported them
idle_yields() {
	grep -o "progress threads' waits: [0-9]* yielded" "$work/out" |
		awk '{ s += $4; n++ } END { if (n) print s; else print "none" }'
}
# yields NAME WANT: WANT is "some" or "none" of the progress threads' waits
yields() {
	local y; y=$(idle_yields)
	if { [ "$2" = some ] && [ "$y" != none ] && [ "$y" -gt 0 ]; } ||
	   { [ "$2" = none ] && [ "$y" = 0 ]; }; then
		echo "ok   $1: $y progress threads' waits yielded"; pass=$((pass + 1))
	else
		echo "FAIL $1: $y progress threads' waits yielded, $2 wanted"
		fail=$((fail + 1))
	fi
}
run "5 PEs, relay" NTBX_SHMEM_RELAY=1 -- --threads 2 -n 5
run "5 PEs, relay off" NTBX_SHMEM_RELAY=0 -- --threads 2 -n 5
run "5 PEs, relay, NTBX_SPIN_US=0" NTBX_SPIN_US=0 -- --threads 1 -n 5
run "5 PEs, relay off, NTBX_SPIN_US=0" NTBX_SPIN_US=0 NTBX_SHMEM_RELAY=0 -- --threads 4 -n 5
# The yields: every thread of the job on one CPU (the relays then share
# it with the PEs they relay for, whatever the binding)
cpu1=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
pre=(taskset -c "$cpu1")
run "5 PEs, relay, no foreign load" NTBX_LOG=debug NTBX_SPIN_TEST_FOREIGN=0 -- \
	--threads 1 -n 5 && yields "relay, no foreign load" some
run "5 PEs, relay, a foreign thread" NTBX_LOG=debug NTBX_SPIN_TEST_FOREIGN=1 -- \
	--threads 1 -n 5 && yields "relay, a foreign thread" none
run "5 PEs, relay, NTBX_SHMEM_YIELD=0" NTBX_LOG=debug NTBX_SPIN_TEST_FOREIGN=0 \
	NTBX_SHMEM_YIELD=0 -- --threads 1 -n 5 && yields "relay, NTBX_SHMEM_YIELD=0" none
run "5 PEs, relay, NTBX_SPIN_US=20" NTBX_LOG=debug NTBX_SPIN_TEST_FOREIGN=0 \
	NTBX_SPIN_US=20 -- --threads 1 -n 5 && yields "relay, NTBX_SPIN_US=20" none
pre=()
if [ -z "${NTBX_SANITIZED:-}" ]; then
	run "7 PEs, relay and forwarded" NTBX_SHMEM_RELAY=1 -- --threads 2 -n 7
	run "7 PEs, NTBX_SPIN_US=0" NTBX_SPIN_US=0 -- --threads 2 -n 7
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
