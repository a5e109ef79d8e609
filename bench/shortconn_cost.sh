#!/usr/bin/env bash
# bench/shortconn_cost.sh — what one short connection costs each side:
# task-clock (us) and page faults per connection of bench/shortconn (2
# clients, SECS seconds, a fork-per-connection server), from perf stat on
# the server (its forked children included) and on the client.  CPU time
# per connection moves less with the machine's load than conn/s does.
#   bench/shortconn_cost.sh [tcp|fab] [BUILD]     (default: fab build)
# Run it under `flock /tmp/ntbx-bench.lock` like every timing run.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-fab}
BUILD=${2:-build}
SECS=${SOCK_BENCH_SECONDS:-3}
BIN=$(pwd)/$BUILD/bin
command -v perf >/dev/null || { echo "shortconn_cost: no perf" >&2; exit 1; }
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-shortcost.XXXXXX)
export NTBX_SHM_DIR
TMP=$(mktemp -d)
SP=
cleanup() {
	[ -n "$SP" ] && { pkill -P "$SP" 2>/dev/null || true; wait "$SP" 2>/dev/null || true; }
	rm -rf "$NTBX_SHM_DIR" "$TMP"
}
trap cleanup EXIT
pre=(); [ "$MODE" = fab ] && pre=("$BIN/ntbx" run --)
P=$((20000 + (RANDOM % 200) * 50 + 7))   # below the ephemeral ports (bench/sock.sh)
. bench/timewait.sh
wait_tw_drain   # earlier runs' ports in TIME_WAIT slow connect() (there)
perf stat -x, -e task-clock,page-faults -o "$TMP/srv" -- \
	"${pre[@]}" "$BIN/shortconn" server $P >/dev/null 2>&1 &
SP=$!
for _ in $(seq 300); do ss -Hltn "sport = :$P" | grep -q . && break; sleep 0.05; done
ss -Hltn "sport = :$P" | grep -q . || { echo "shortconn_cost: no server on port $P" >&2; exit 1; }
perf stat -x, -e task-clock,page-faults -o "$TMP/cli" -- \
	"${pre[@]}" "$BIN/shortconn" client 127.0.0.1 $P 2 "$SECS" >"$TMP/out"
pkill -P "$SP"   # perf's child, the server: perf then writes its counts
wait "$SP" || true
SP=
n=$(sed -n 's/^conns=\([0-9]*\).*/\1/p' "$TMP/out")
[ "${n:-0}" -gt 0 ] || { echo "shortconn_cost: no connections" >&2; exit 1; }
for side in srv cli; do
	awk -F, -v n="$n" -v side=$side '
		$3 == "task-clock" { us = $1 * 1000 / n }
		$3 == "page-faults" { pf = $1 / n }
		END { printf "%s %s: %.1f us, %.1f page faults per connection\n", side, MODE, us, pf }
	' MODE="$MODE" "$TMP/$side"
done
cat "$TMP/out"
