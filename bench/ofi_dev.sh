#!/usr/bin/env bash
# bench/ofi_dev.sh — the ofi backend at the device API against raw libfabric,
# in the same run, between two harness hosts (issue 13):
#
#   ofi_raw   bench/ofi_raw, server th0, client th1, FI_PROVIDER=tcp:
#             fi_writedata ping-pong 8 B (one-way p50/p99), fi_write
#             bandwidth 64 KiB and 1 MiB
#   ofi dev   tests/ofi/ofidev through `ntbx node serve` on each host:
#             doorbell ping-pong (ntbx_peer_db_set, the peer polling its
#             doorbell register, and asleep in ntbx_db_wait), one-way p50/p99;
#             ntbx_dma_write from node memory (zero copy) and from private
#             memory (staged through node memory), 64 KiB and 1 MiB, GB/s
#
# OFI_ROUNDS rounds (default 3), each value the median of the rounds.  Hosts
# from ../shared/twohost.sh, brought up and taken down here: run it under
# `flock /tmp/ntbx-test.lock`.  CSV: bench/out/ofi_dev.csv.  Needs root.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin}
OUT=${BENCH_OUT:-$ROOT/bench/out}
TWOHOST=${NTBX_TWOHOST:-$(cd "$ROOT/.." && pwd)/shared/twohost.sh}
ROUNDS=${OFI_ROUNDS:-3}
NPP=${OFI_NPP:-10000}
MIB=${OFI_MIB:-512}
[ "$(id -u)" = 0 ] || { echo "bench/ofi_dev.sh: SKIP: needs root"; exit 0; }
for b in ofi_raw ofidev ntbx; do
	[ -x "$BIN/$b" ] || { echo "bench/ofi_dev.sh: SKIP: no $BIN/$b (libfabric-dev at configure time)"; exit 0; }
done
mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+dirty"
WORK=$(mktemp -d /var/tmp/ntbx-ofi-dev-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	"$TWOHOST" down >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
"$TWOHOST" up 2 >/dev/null
H0=10.77.0.1 H1=10.77.0.2
PORT=$((42000 + ($$ % 4000) * 2))
export FI_PROVIDER=tcp
IN0=("$TWOHOST" exec 0)
IN1=("$TWOHOST" exec 1)

wait_file() {   # FILE PID: bounded 10 s, or until PID exits
	local i
	for i in $(seq 200); do
		[ -s "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

F=ofibench
for i in 0 1; do
	"$TWOHOST" exec $i "$BIN/ntbx" fabric create $F --backend ofi --hosts $H0:$PORT,$H1:$PORT >/dev/null
	"$TWOHOST" exec $i "$BIN/ntbx" node serve --fabric $F --ready "$WORK/ready$i" \
		>"$WORK/agent$i.log" 2>&1 &
	PIDS+=($!)
	wait_file "$WORK/ready$i" $! || { cat "$WORK/agent$i.log"; exit 1; }
done
"${IN0[@]}" "$BIN/ofidev" $F up 10000 >/dev/null
"${IN1[@]}" "$BIN/ofidev" $F up 10000 >/dev/null

: >"$WORK/vals"
val() { echo "$1,$2" >>"$WORK/vals"; }
RP=$((PORT + 100))
for r in $(seq "$ROUNDS"); do
	# raw libfabric
	rm -f "$WORK/rready"
	"${IN0[@]}" "$BIN/ofi_raw" -s $H0 -p $RP -r "$WORK/rready" -t 30 >/dev/null 2>"$WORK/raw.s.err" &
	sp=$!
	wait_file "$WORK/rready" $sp
	"${IN1[@]}" "$BIN/ofi_raw" -c $H0 -p $RP -t 30 -q -n $NPP -M $MIB -S 8 -B 65536,1M \
		>"$WORK/raw.csv"
	wait $sp || true
	val raw_pp_p50 "$(awk -F, '$1=="pingpong_p50" {print $4}' "$WORK/raw.csv")"
	val raw_pp_p99 "$(awk -F, '$1=="pingpong_p99" {print $4}' "$WORK/raw.csv")"
	val raw_bw_64K "$(awk -F, '$1=="bw" && $2==65536 {print $4}' "$WORK/raw.csv")"
	val raw_bw_1M "$(awk -F, '$1=="bw" && $2==1048576 {print $4}' "$WORK/raw.csv")"
	# the backend
	for mode in poll sleep; do
		"${IN0[@]}" "$BIN/ofidev" $F pingpong-b $NPP $mode >/dev/null &
		bp=$!
		"${IN1[@]}" "$BIN/ofidev" $F pingpong-a $NPP $mode >"$WORK/pp.out"
		wait $bp
		val dev_pp_${mode}_p50 "$(sed -n 's/.*p50 \([0-9.]*\) us.*/\1/p' "$WORK/pp.out")"
		val dev_pp_${mode}_p99 "$(sed -n 's/.*p99 \([0-9.]*\) us.*/\1/p' "$WORK/pp.out")"
	done
	for size in 65536 1048576; do
		"${IN0[@]}" "$BIN/ofidev" $F bw-b $size >/dev/null &
		bp=$!
		"${IN1[@]}" "$BIN/ofidev" $F bw-a $size $MIB >"$WORK/bw.out"
		wait $bp
		val dev_bw_$size "$(sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p' "$WORK/bw.out")"
		"${IN0[@]}" "$BIN/ofidev" $F bw-b $size >/dev/null &
		bp=$!
		"${IN1[@]}" "$BIN/ofidev" $F bw-a $size $MIB private >"$WORK/bw.out"
		wait $bp
		val dev_bwp_$size "$(sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p' "$WORK/bw.out")"
	done
	echo "round $r: $(tail -n 12 "$WORK/vals" | tr '\n' ' ')" >&2
done
med() { awk -F, -v k="$1" '$1==k {print $2}' "$WORK/vals" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
PROV=$(sed -n 's/.*serving with provider \([^ ,]*\).*/\1/p' "$WORK/agent0.log" | head -1)
CSV="$OUT/ofi_dev.csv"
echo "test,what,value,unit,commit,provider" >"$CSV"
row() { echo "$1,$2,$(med "$3"),$4,$COMMIT,$PROV" >>"$CSV"; }
row pingpong_8B_p50 raw raw_pp_p50 us
row pingpong_8B_p99 raw raw_pp_p99 us
row pingpong_db_p50 "ofi dev (polling)" dev_pp_poll_p50 us
row pingpong_db_p99 "ofi dev (polling)" dev_pp_poll_p99 us
row pingpong_db_p50 "ofi dev (asleep)" dev_pp_sleep_p50 us
row pingpong_db_p99 "ofi dev (asleep)" dev_pp_sleep_p99 us
row bw_64K raw raw_bw_64K GB/s
row bw_1M raw raw_bw_1M GB/s
row bw_64K "ofi dev" dev_bw_65536 GB/s
row bw_1M "ofi dev" dev_bw_1048576 GB/s
row bw_64K "ofi dev (staged)" dev_bwp_65536 GB/s
row bw_1M "ofi dev (staged)" dev_bwp_1048576 GB/s
echo "== th1 -> th0, $PROV, median of $ROUNDS rounds, commit $COMMIT"
column -t -s, "$CSV"
