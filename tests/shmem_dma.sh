#!/usr/bin/env bash
# OpenSHMEM test programs on fabrics whose backend reaches peer windows
# only by DMA (NTBX_DEV_DMA_ONLY=1): a switch of 2 and 3 PEs, and a ring of
# 3 (tests/shmem/runner.sh dma, dma-ring); and that puts and gets reach
# the PEs of other nodes by DMA on a switch, and the ring's neighbours
# only (shmem_dma.c).
here=$(dirname "$0")
rc=0
bash "$here/shmem/runner.sh" dma || rc=1
bash "$here/shmem/runner.sh" dma-ring || rc=1
BIN=${NTBX_TEST_BIN:?set NTBX_TEST_BIN to the build bin directory}
work=$(mktemp -d /var/tmp/ntbx-shmem-dma.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$BIN/oshcc" -O1 -I"$here/shmem" -o "$work/bulk" "$here/shmem/bulk.c" || exit 1
# expect TOPOLOGY N: PE 0 says it reaches N other PEs by DMA
expect() {
	local out
	out=$(NTBX_DEV_DMA_ONLY=1 SHMEM_INFO=1 "$BIN/oshrun" --timeout 120 \
		--topology "$1" -n 4 "$work/bulk" 2>&1)
	if grep -q "^PASS" <<<"$out" &&
	   grep -q "puts and gets by DMA to $2 of the other PEs" <<<"$out"; then
		echo "ok   bulk on a $1 of 4, DMA to $2 PEs"
	else
		echo "FAIL bulk on a $1 of 4: not DMA to $2 PEs"; echo "$out" | tail -20
		rc=1
	fi
}
expect switch 3
expect ring 2
exit $rc
