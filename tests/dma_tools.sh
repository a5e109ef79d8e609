#!/usr/bin/env bash
# tests/dma_tools.sh — the ntbx benchmarks and `fabric show` on a backend
# that reaches peer windows only by DMA (NTBX_DEV_DMA_ONLY=1): perf picks
# the DMA engine and refuses CPU stores with one line, pingpong sends by
# DMA in both modes, qp streams one hop (ring and push) and over a ring's
# forwarders, fabric show reads outbound window sizes.  Results must be
# well-formed and positive; speed is never asserted here (bench/dma.sh
# measures it).
set -euo pipefail

. "$(dirname "$0")/lib/local.sh" dma_tools
export NTBX_DEV_DMA_ONLY=1
. "$(dirname "$0")/lib/cli_lib.sh"

run "$NTBX" perf --sizes 4K,1M --threads 1,2 --seconds 0.02 --reps 1 --json
expect_rc "perf, DMA only" 0
json_lines "perf, DMA only" "size mode threads mbps memcpy_mbps ratio" \
	"size threads mbps memcpy_mbps ratio" 4
contains "perf picks the DMA engine" "$out" '"mode": "dma"'
run "$NTBX" perf --mode cpu --sizes 4K --seconds 0.02 --reps 1
expect_rc "perf --mode cpu, DMA only" 1
contains "perf --mode cpu says why" "$err" "only by DMA"

run "$NTBX" pingpong --sizes 8,4K --iters 300 --json
expect_rc "pingpong, DMA only" 0
json_lines "pingpong, DMA only" "size mode oneway_ns_p50 oneway_ns_p99" \
	"size oneway_ns_p50 oneway_ns_p99" 4

QPKEYS="size hops threads mbps oneway_ns_p50 memcpy_mbps"
run "$NTBX" qp --sizes 64,64K --seconds 0.05 --reps 1 --iters 50 --json
expect_rc "qp, DMA only" 0
json_lines "qp, DMA only" "$QPKEYS" "$QPKEYS" 2
run "$NTBX" qp --sizes 256K --push --posted 4 --seconds 0.05 --reps 1 --iters 20 --json
expect_rc "qp push, DMA only" 0
json_lines "qp push, DMA only" "$QPKEYS" "$QPKEYS" 1
run "$NTBX" qp --nodes 4 --topology ring --sizes 4K,64K --seconds 0.05 --reps 1 \
	--iters 20 --json
expect_rc "qp ring, DMA only" 0
json_lines "qp ring, DMA only" "$QPKEYS" "$QPKEYS" 4
if python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert sorted({r["hops"] for r in rows}) == [1, 2], rows
' <"$WORK/out" 2>"$WORK/pyerr"; then ok "qp ring, DMA only, covers hops 1 and 2"
else bad "qp ring rows: $(tail -1 "$WORK/pyerr")"; fi

# fabric show: the windows bring-up translated stay after the nodes left
"$NTBX" fabric create showfab --nodes 2 --memory 32M --window 32M >/dev/null
run "$NTBX" pingpong --fabric showfab --sizes 8 --iters 100
expect_rc "pingpong --fabric, DMA only" 0
run "$NTBX" fabric show showfab --json
expect_rc "fabric show, DMA only" 0
if python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
nodes = [r for r in rows if "node" in r]
assert len(nodes) == 2, rows
for n in nodes:
    for p in n["ports"]:
        assert p["outbound"][0]["size"] == 32 << 20, p
' "$WORK/out" 2>"$WORK/pyerr"; then ok "fabric show, DMA only: outbound window sizes"
else bad "fabric show: $(tail -1 "$WORK/pyerr")"; fi
"$NTBX" fabric destroy showfab >/dev/null

finish dma_tools
