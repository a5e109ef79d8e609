#!/usr/bin/env bash
# bench/dma.sh — the shm backend in DMA-only mode (NTBX_DEV_DMA_ONLY=1)
# against its direct mode, in the same run: queue-pair streams and
# latency (ntbx qp, one hop; --push with 8 posted buffers for 64K and up),
# doorbell and poll ping-pong (ntbx pingpong), window writes (ntbx perf:
# CPU stores in direct mode, the DMA engine in both).  Rounds alternate
# direct and DMA-only; each number is the best of ROUNDS.  Prints one CSV
# line per measurement and a table of DMA-only / direct.
#
#   bench/dma.sh [ROUNDS]        (default 3; BIN=build/bin)
#
# Run it under `flock /tmp/ntbx-test.lock` on a shared machine.
set -euo pipefail
ROUNDS=${1:-3}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
NTBX=$BIN/ntbx
[ -x "$NTBX" ] || { echo "bench/dma.sh: no $NTBX (make all first)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export NTBX_SHM_DIR=$OUT
unset NTBX_FABRIC NTBX_NODE

one() { # MODE(direct|dma) ROUND
	local env=()
	[ "$1" = dma ] && env=(env NTBX_DEV_DMA_ONLY=1)
	"${env[@]}" "$NTBX" qp --sizes 64,4K --seconds 0.3 --reps 1 --iters 2000 --json |
		sed "s/^/$1 qp /" >>"$OUT/raw"
	"${env[@]}" "$NTBX" qp --sizes 64K,1M --push --posted 8 --seconds 0.3 --reps 1 \
		--iters 500 --json | sed "s/^/$1 qp-push /" >>"$OUT/raw"
	"${env[@]}" "$NTBX" pingpong --sizes 8,4K --iters 5000 --json |
		sed "s/^/$1 pingpong /" >>"$OUT/raw"
	"${env[@]}" "$NTBX" perf --sizes 64K,1M --mode dma --seconds 0.3 --reps 1 --json |
		sed "s/^/$1 perf /" >>"$OUT/raw"
	if [ "$1" = direct ]; then
		"$NTBX" perf --sizes 64K,1M --mode cpu --seconds 0.3 --reps 1 --json |
			sed "s/^/$1 perf /" >>"$OUT/raw"
	fi
}
for r in $(seq "$ROUNDS"); do
	one direct "$r"
	one dma "$r"
done
python3 - "$OUT/raw" <<'PY'
import json, sys
best = {}
def keep(k, v, lower):
    if k not in best or (v < best[k] if lower else v > best[k]):
        best[k] = v
for line in open(sys.argv[1]):
    mode, tool, js = line.split(" ", 2)
    o = json.loads(js)
    if tool.startswith("qp"):
        keep((tool, o["size"], "mbps", mode), o["mbps"], False)
        keep((tool, o["size"], "oneway_ns_p50", mode), o["oneway_ns_p50"], True)
    elif tool == "pingpong":
        keep((tool, o["size"], o["mode"] + "_ns_p50", mode), o["oneway_ns_p50"], True)
    else:
        keep((tool, o["size"], o["mode"] + "_mbps", mode), o["mbps"], False)
print("tool,size,metric,direct,dma_only,dma_only/direct")
for (tool, size, metric, mode) in sorted(best):
    if mode != "direct":
        continue
    d = best[(tool, size, metric, "direct")]
    m = best.get((tool, size, metric, "dma"))
    if m is None:
        print("%s,%s,%s,%.0f,-,-" % (tool, size, metric, d))
    else:
        print("%s,%s,%s,%.0f,%.0f,%.3f" % (tool, size, metric, d, m, m / d))
PY
