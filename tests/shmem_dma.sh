#!/usr/bin/env bash
# OpenSHMEM test programs on fabrics whose backend reaches peer windows
# only by DMA (NTBX_DEV_DMA_ONLY=1): a switch of 2 and 3 PEs, and a ring of
# 3 (tests/shmem/runner.sh dma, dma-ring).
here=$(dirname "$0")
rc=0
bash "$here/shmem/runner.sh" dma || rc=1
bash "$here/shmem/runner.sh" dma-ring || rc=1
exit $rc
