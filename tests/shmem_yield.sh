#!/usr/bin/env bash
# OpenSHMEM with more PEs than CPUs (shmem_signal.c, spin.c's
# ntbx_spin_group_yield): tests/shmem/coll_loop.c (collectives back to back,
# every result checked) on twice as many PEs as CPUs (at least 4), on a
# switch and a ring.  What the choice between a yield and a sleep sees of
# foreign load is injected (NTBX_SPIN_TEST_FOREIGN) where the test asserts
# it, so that other processes on the machine do not decide:
#  - no foreign load: the PEs yield to each other (some waits yielded,
#    counted by NTBX_LOG=debug at shmem_finalize), and keep the CPU
#    oshrun pinned them to (no PE lets go of its pin);
#  - one foreign runnable thread per CPU: no wait yields (they sleep);
#  - one foreign runnable thread on a machine of 2 CPUs or more (the
#    group keeps a CPU of its own): every PE lets go of its pin
#    (shmem_bind.c) and the waits yield;
#  - no foreign load but NTBX_SHMEM_YIELD=0, or NTBX_SPIN_US set: no wait
#    yields;
#  - the machine as it is, then beside one real busy loop per CPU (`yes`):
#    it completes and checks (a starvation check; no timing asserted).
# Every run is bounded by oshrun --timeout.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${NTBX_TEST_BIN:?set NTBX_TEST_BIN to the build bin directory}
work=$(mktemp -d /tmp/ntbx-shmem-yield.XXXXXX)
export NTBX_SHM_DIR
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-test-yield-XXXXXX)
busy=()
cleanup() {
	for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$work" "$NTBX_SHM_DIR"
}
trap cleanup EXIT
export SHMEM_SYMMETRIC_SIZE=32M
"$BIN/oshcc" -O1 -g -Wall -Wextra -Werror -I"$here/shmem" -o "$work/coll_loop" \
	"$here/shmem/coll_loop.c" || exit 1
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; tail -20 "$work/out"; fail=$((fail + 1)); }
# run NAME ENV... -- OSHRUN-ARGS...: PASS from the program, exit 0
# (ITERS: the program's iterations, 300 by default)
run() {
	local name=$1; shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	if env NTBX_LOG=debug "${envs[@]}" "$BIN/oshrun" --timeout 120 "$@" \
		"$work/coll_loop" "${ITERS:-300}" >"$work/out" 2>&1 &&
		grep -q '^PASS' "$work/out"; then
		ok "$name"
		return 0
	fi
	bad "$name"
	return 1
}
# yielded: the sum of the PEs' "N yielded" counts in the last run's output
yielded() {
	grep -o 'waits that outlived their spin: [0-9]* yielded' "$work/out" |
		awk '{ s += $6; n++ } END { if (n) print s; else print "none" }'
}
ncpu=$(nproc)
pes=$((2 * ncpu)); [ "$pes" -lt 4 ] && pes=4
[ "$pes" -gt 16 ] && { echo "skip: $ncpu CPUs, too many PEs to crowd them"; exit 77; }
# let_go: the PEs whose pin was let go at least once in the last run
let_go() {
	grep -o 'pin let go [0-9]* times' "$work/out" | awk '$4 > 0 { n++ } END { print n + 0 }'
}
# no_yields NAME: every PE reported its counts, and none yielded
no_yields() {
	local y; y=$(yielded)
	local n; n=$(grep -c 'waits that outlived their spin' "$work/out")
	if [ "$y" = 0 ] && [ "$n" -eq "$pes" ]; then
		ok "$1: no wait yielded ($n PEs reported)"
	else
		bad "$1: yielded $y, $n PEs reported"
	fi
}

for topo in switch ring; do
	run "$topo, $pes PEs, no foreign load" NTBX_SPIN_TEST_FOREIGN=0 -- \
		--topology $topo -n $pes && {
		y=$(yielded)
		if [ "$y" != none ] && [ "$y" -gt 0 ] && [ "$(let_go)" = 0 ]; then
			ok "$topo, no foreign load: $y waits yielded, every pin kept"
		else
			bad "$topo, no foreign load: $y waits yielded, $(let_go) pins let go"
		fi
	}
	run "$topo, $pes PEs, a foreign thread per CPU" \
		NTBX_SPIN_TEST_FOREIGN="$ncpu" -- --topology $topo -n $pes &&
		no_yields "$topo, a foreign thread per CPU"
	if [ "$ncpu" -ge 2 ]; then
		# a PE lets go after 100 ms of such load: run long enough
		ITERS=6000 run "$topo, $pes PEs, one foreign thread" \
			NTBX_SPIN_TEST_FOREIGN=1 -- --topology $topo -n $pes && {
			y=$(yielded) g=$(let_go)
			if [ "$y" != none ] && [ "$y" -gt 0 ] && [ "$g" -eq "$pes" ]; then
				ok "$topo, one foreign thread: $y waits yielded, $g pins let go"
			else
				bad "$topo, one foreign thread: $y waits yielded, $g of $pes pins let go"
			fi
		}
	fi
	run "$topo, $pes PEs, NTBX_SHMEM_YIELD=0" NTBX_SPIN_TEST_FOREIGN=0 \
		NTBX_SHMEM_YIELD=0 -- --topology $topo -n $pes &&
		no_yields "$topo, NTBX_SHMEM_YIELD=0"
	run "$topo, $pes PEs, NTBX_SPIN_US=20" NTBX_SPIN_TEST_FOREIGN=0 \
		NTBX_SPIN_US=20 -- --topology $topo -n $pes &&
		no_yields "$topo, NTBX_SPIN_US=20"
	run "$topo, $pes PEs, as the machine is" -- --topology $topo -n $pes &&
		echo "     ($topo: $(yielded) waits yielded)"
done

# A foreign busy loop per CPU: the job completes, every result checked.
for _ in $(seq 1 "$ncpu"); do
	yes >/dev/null &
	busy+=($!)
done
for topo in switch ring; do
	run "$topo, $pes PEs beside $ncpu busy loops" -- --topology $topo -n $pes &&
		echo "     ($topo beside the loops: $(yielded) waits yielded)"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
