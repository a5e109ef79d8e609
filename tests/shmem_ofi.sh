#!/usr/bin/env bash
# tests/shmem_ofi.sh — OpenSHMEM across hosts on the ofi backend (issue 13
# item 4), between two harness hosts (../shared/twohost.sh), provider tcp:
#   1. tests/shmem/hosts.c on 2 hosts x 2 PEs started by Open MPI's mpirun
#      (rank, size and the start-up exchange from its PMIx server): put/get
#      8 B and 1 MiB every byte checked, fetch-add from all PEs, barrier,
#      broadcast, reductions, wait_until across hosts; PEs 0,1 on th0 and
#      2,3 on th1 (two PEs share each node's memory);
#   2. every other tests/shmem/*.c program the same way (six under
#      NTBX_SANITIZED=1; SHMEM_OFI_PROGS overrides the list);
#   3. a PE killed (SIGKILL) mid-run: mpirun ends the job with an error
#      naming it, within the bound, no hang;
#   4. a program started by mpirun without NTBX_SHMEM_FABRIC says what is
#      missing;
#   5. `oshrun --hosts th0,th1 -n 4 --fabric F --rsh /run/twohost/bin/ssh`
#      (which hands the launch to mpirun) runs tests/shmem/hosts.c the same.
# Skips (77) unless root, with libfabric, mpirun and libntbx-shmem built
# with PMIx.  twohost state is machine-wide: the script takes the lock
# itself (tests/lib/twohost_lock.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/hosts.sh" shmem_ofi
OSHCC=$BIN/oshcc
[ -x "$OSHCC" ] || skip "no $OSHCC"
command -v mpirun >/dev/null || skip "no mpirun (openmpi-bin)"
grep -q "libpmix.so.2" "$BIN/../lib/libntbx-shmem.so" ||
	skip "libntbx-shmem was built without PMIx (libpmix-dev)"
. "$HERE/lib/twohost_lock.sh"
hosts_up
PORT=$((43000 + ($$ % 4000) * 2))
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-32M}
# the sanitizer build: libfabric's and libpmix's own leaks are not ours
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0

# every program of tests/shmem (a few under the sanitizers, which are slow),
# built where both hosts see them
ALL=$(cd "$HERE/shmem" && ls *.c | sed 's/\.c$//' | grep -vx hosts | tr '\n' ' ')
[ -n "${NTBX_SANITIZED:-}" ] && ALL="rma amo coll sync wait15 lock"
PROGS=${SHMEM_OFI_PROGS:-$ALL}
for p in hosts $PROGS; do
	"$OSHCC" -O1 -g -Wall -Wextra -Werror -I"$HERE/shmem" -o "$WORK/$p" "$HERE/shmem/$p.c" \
		>"$WORK/$p.cc" 2>&1 || { bad "$p does not build"; show "$WORK/$p.cc"; }
done

F=shx
for i in 0 1; do
	create $F $i $H0:$PORT,$H1:$PORT --window 512M || { bad "fabric create on host $i"; show "$WORK/create.$F.$i"; }
done
if agent $F 0 && agent $F 1; then
	ok "an agent serves each host"
else
	bad "an agent did not become ready"
	show "$WORK"/agent.*
fi

# run NAME TIMEOUT [env...] -- PROGRAM: mpirun from host 0, 2 PEs per host
MPIRUN=(mpirun --allow-run-as-root --mca plm_rsh_agent /run/twohost/bin/ssh
	--mca oob_tcp_if_include eth0 -H th0:2,th1:2 -np 4
	-x FI_PROVIDER -x SHMEM_SYMMETRIC_SIZE -x ASAN_OPTIONS -x UBSAN_OPTIONS)
run() {
	local name=$1 tmo=$2
	shift 2
	local rc=0
	"$TWOHOST" exec 0 env NTBX_SHMEM_FABRIC=$F UBSAN_OPTIONS=${UBSAN_OPTIONS:-} \
		timeout -k 5 "$tmo" "${MPIRUN[@]}" -x NTBX_SHMEM_FABRIC "$@" >"$WORK/$name.out" 2>&1 || rc=$?
	return $rc
}

# hosts_passed OUT: hosts.c passed with PEs 0,1 on th0 and 2,3 on th1
hosts_passed() {
	grep -q "^PASS hosts (4 PEs)" "$1" &&
		[ "$(grep -Ec "^PE [01] of 4 on th0$" "$1")" = 2 ] &&
		[ "$(grep -Ec "^PE [23] of 4 on th1$" "$1")" = 2 ]
}

# 1. the cross-host program
t0=$(date +%s%N)
rc=0
run hosts 120 "$WORK/hosts" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 0 ] && hosts_passed "$WORK/hosts.out"; then
	ok "hosts: 2 hosts x 2 PEs under mpirun, put/get 8 B and 1 MiB, fetch-add, barrier, broadcast, reduce, wait_until ($ms ms)"
else
	bad "hosts (exit $rc)"
	show "$WORK/hosts.out"
	tail -5 "$WORK"/agent.* | show
fi

# 2. the other test programs
for p in $PROGS; do
	[ -x "$WORK/$p" ] || continue
	rc=0
	run "$p" 120 -x SHMEM_INFO=1 "$WORK/$p" || rc=$?
	# the two PEs of the other host by DMA (shmem_dma.c), not requests
	if [ $rc = 0 ] && grep -q "^PASS" "$WORK/$p.out" &&
	   grep -q "puts and gets by DMA to 2 of the other PEs" "$WORK/$p.out"; then
		ok "$p across 2 hosts x 2 PEs"
	else
		bad "$p across 2 hosts (exit $rc)"
		tail -20 "$WORK/$p.out" | show
	fi
done

# 3. a PE killed mid-run ends the job with an error, within the bound
t0=$(date +%s%N)
rc=0
run die 60 -x SHMEM_TEST_DIE=3 "$WORK/hosts" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc != 0 ] && [ $ms -lt 55000 ] && grep -q "PE 3 kills itself" "$WORK/die.out" &&
   grep -Eiq "signal 9|killed|PE 3" "$WORK/die.out" && ! grep -q "^PASS" "$WORK/die.out"; then
	ok "PE 3 killed: the job ended in $ms ms (exit $rc): $(grep -Ei "signal 9|connection to PE 3" "$WORK/die.out" | head -1)"
else
	bad "PE 3 killed: exit $rc after $ms ms"
	show "$WORK/die.out"
fi

# 4. mpirun without a fabric: says what is missing
rc=0
"$TWOHOST" exec 0 timeout -k 5 60 "${MPIRUN[@]}" "$WORK/hosts" >"$WORK/nofab.out" 2>&1 || rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "NTBX_SHMEM_FABRIC names no fabric" "$WORK/nofab.out"; then
	ok "no fabric named: $(grep -m1 -o "NTBX_SHMEM_FABRIC names no fabric[^:]*" "$WORK/nofab.out")"
else
	bad "no fabric named (exit $rc)"
	show "$WORK/nofab.out"
fi

# 5. oshrun --hosts
rc=0
"$TWOHOST" exec 0 env UBSAN_OPTIONS=${UBSAN_OPTIONS:-} timeout -k 5 120 "$BIN/oshrun" -n 4 --hosts th0,th1 --fabric $F \
	--rsh /run/twohost/bin/ssh --mca oob_tcp_if_include eth0 -x ASAN_OPTIONS -x UBSAN_OPTIONS \
	"$WORK/hosts" >"$WORK/oshrun.out" 2>&1 || rc=$?
if [ $rc = 0 ] && hosts_passed "$WORK/oshrun.out"; then
	ok "oshrun -n 4 --hosts th0,th1: 2 PEs on each host, hosts.c passes"
else
	bad "oshrun --hosts (exit $rc)"
	show "$WORK/oshrun.out"
fi

echo "shmem_ofi: $pass passed, $fail failed"
[ "$fail" = 0 ]
