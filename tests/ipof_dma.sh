#!/usr/bin/env bash
# tests/ipof_two.sh on a backend that reaches peer windows only by DMA
# (NTBX_DEV_DMA_ONLY=1): the daemons' zero-copy sends (ring space and
# posted buffers reserved in the peer's memory) are staged locally and
# sent by DMA.  NTBX_LOG=info makes each daemon log that it ran DMA-only.
export NTBX_DEV_DMA_ONLY=1 NTBX_LOG=info IPOF_TWO_MB=${IPOF_TWO_MB:-50}
exec bash "$(dirname "$0")/ipof_two.sh"
