#!/usr/bin/env bash
# Build every OpenSHMEM test program in tests/shmem/ and run it under
# oshrun, checking each prints PASS and exits 0.
#
#   runner.sh switch   ntbx's oshcc/oshrun, switch fabric, 2, 4 and 8 PEs
#   runner.sh ring     ntbx's oshcc/oshrun, ring fabric, 2, 3, 4 and 5 PEs
#   runner.sh dma      ntbx's oshcc/oshrun, switch fabric in DMA-only mode
#                      (NTBX_DEV_DMA_ONLY=1: every other PE through queue
#                      pairs, atomics by its progress thread), 2 and 3 PEs
#   runner.sh dma-ring the same on a ring fabric, 3 PEs (its forwarders too)
#   runner.sh ompi     Open MPI's oshcc/oshrun (OpenSHMEM 1.4: programs
#                      marked "shmem-test: 1.5" or "1.6" are skipped)
#
# NTBX_TEST_BIN is the build's bin/ directory.  Under NTBX_SANITIZED=1 the
# PE counts are smaller.  Ends with "N passed, N failed".
set -uo pipefail
mode=${1:-switch}
here=$(cd "$(dirname "$0")" && pwd)
BIN=${NTBX_TEST_BIN:?set NTBX_TEST_BIN to the build bin directory}
work=$(mktemp -d /tmp/ntbx-shmem-test.XXXXXX)
export NTBX_SHM_DIR
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-test-shmem-XXXXXX)
cleanup() { rm -rf "$work" "$NTBX_SHM_DIR"; }
trap cleanup EXIT
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-32M}

cc=$BIN/oshcc run=("$BIN/oshrun") cflags=(-O1 -g -Wall -Wextra -Werror)
case $mode in
switch) sizes="2 4 8"; [ -n "${NTBX_SANITIZED:-}" ] && sizes="2 4" ;;
ring)   sizes="2 3 4 5"; [ -n "${NTBX_SANITIZED:-}" ] && sizes="2 3 4"
	run+=(--topology ring --threads 2) ;;
dma)    sizes="2 3"; [ -n "${NTBX_SANITIZED:-}" ] && sizes="2"
	export NTBX_DEV_DMA_ONLY=1 ;;
dma-ring) sizes="3"
	run+=(--topology ring --threads 2)
	export NTBX_DEV_DMA_ONLY=1 ;;
ompi)
	if ! command -v /usr/bin/oshcc >/dev/null || ! command -v /usr/bin/oshrun >/dev/null; then
		echo "Open MPI's oshcc/oshrun are not installed (apt-get install openmpi-bin libopenmpi-dev)" >&2
		exit 1
	fi
	cc=/usr/bin/oshcc
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	run=(/usr/bin/oshrun --mca osc ^rdma --oversubscribe)
	cflags+=(-DOMPI_KNOWN_BUGS -Wno-error)
	sizes="2 4 8"; [ -n "${NTBX_SANITIZED:-}" ] && sizes="2"
	;;
*) echo "usage: runner.sh switch|ring|dma|dma-ring|ompi" >&2; exit 2 ;;
esac

pass=0 fail=0
for src in "$here"/*.c; do
	name=$(basename "$src" .c)
	if [ "$mode" = ompi ] && grep -Eq "shmem-test: 1\.[56]" "$src"; then
		continue
	fi
	if ! "$cc" "${cflags[@]}" -I"$here" -o "$work/$name" "$src" 2>"$work/$name.cc"; then
		echo "FAIL $name: does not build with $cc"; cat "$work/$name.cc"
		fail=$((fail + 1)); continue
	fi
	# "shmem-test-pes-switch: 3 5" in a program adds PE counts on a switch
	extra=
	if [ "$mode" = switch ] && [ -z "${NTBX_SANITIZED:-}" ]; then
		extra=$(sed -n 's/.*shmem-test-pes-switch: *//p' "$src" | head -1)
	fi
	for n in $sizes $extra; do
		out=$work/$name.$n.out
		if [ "$mode" = ompi ]; then
			timeout 120 "${run[@]}" -n "$n" "$work/$name" >"$out" 2>&1
		else
			"${run[@]}" --timeout 120 -n "$n" "$work/$name" >"$out" 2>&1
		fi
		rc=$?
		if [ $rc -eq 0 ] && grep -q "^PASS" "$out"; then
			pass=$((pass + 1))
			echo "ok   $name -n $n"
		else
			fail=$((fail + 1))
			echo "FAIL $name -n $n (exit $rc)"; tail -20 "$out"
		fi
	done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
