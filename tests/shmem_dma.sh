#!/usr/bin/env bash
# OpenSHMEM test programs on a switch fabric whose backend reaches peer
# windows only by DMA (NTBX_DEV_DMA_ONLY=1; tests/shmem/runner.sh dma).
exec bash "$(dirname "$0")/shmem/runner.sh" dma
