#!/usr/bin/env bash
# bench/ofi_sock.sh — sockets under `ntbx run` across two hosts of an ofi
# fabric against kernel TCP over the same veth, in the same run (issue 13):
#
#   iperf3 -l 128K, th1 -> th0, OFI_SECS seconds: GB/s (target >= 1.0x TCP)
#   sockperf ping-pong 64 B, th1 -> th0: one-way p50 (target <= 1/3 of TCP)
#
# Hosts from ../shared/twohost.sh (own network and mount namespaces joined by
# veth), FI_PROVIDER=tcp (tcp;ofi_rxm), one `ntbx node serve` per host.
# OFI_ROUNDS rounds (default 3), kernel TCP and ntbx alternating in each; each
# value the median of the rounds.  Takes the tests' machine-wide lock itself
# (tests/lib/twohost_lock.sh).  CSV:
# bench/out/ofi_sock.csv.  Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin}
OUT=${BENCH_OUT:-$ROOT/bench/out}
TWOHOST=${NTBX_TWOHOST:-$(cd "$ROOT/.." && pwd)/shared/twohost.sh}
ROUNDS=${OFI_ROUNDS:-3}
SECS=${OFI_SECS:-5}
[ "$(id -u)" = 0 ] || { echo "bench/ofi_sock.sh: SKIP: needs root"; exit 0; }
for b in ntbx; do
	[ -x "$BIN/$b" ] || { echo "bench/ofi_sock.sh: SKIP: no $BIN/$b (libfabric-dev at configure time)"; exit 0; }
done
for t in iperf3 sockperf; do
	command -v $t >/dev/null || { echo "bench/ofi_sock.sh: SKIP: no $t"; exit 0; }
done
. "$ROOT/tests/lib/twohost_lock.sh"
mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+dirty"
WORK=$(mktemp -d /var/tmp/ntbx-ofi-sock-bench.XXXXXX)
PIDS=()
cleanup() {
	# the run has said everything; what follows is bash reporting the
	# agents and servers killed here as jobs that died of a signal
	exec 2>/dev/null
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	"$TWOHOST" down >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
"$TWOHOST" up 2 >/dev/null
H0=10.77.0.1 H1=10.77.0.2
PORT=$((43000 + ($$ % 4000) * 4))
export FI_PROVIDER=tcp
F=ofisock
for i in 0 1; do
	"$TWOHOST" exec $i "$BIN/ntbx" fabric create $F --backend ofi --hosts $H0:$PORT,$H1:$PORT >/dev/null
	"$TWOHOST" exec $i "$BIN/ntbx" node serve --fabric $F --ready "$WORK/ready.$i" >"$WORK/agent.$i" 2>&1 &
	PIDS+=($!)
done
for i in $(seq 200); do [ -s "$WORK/ready.0" ] && [ -s "$WORK/ready.1" ] && break; sleep 0.05; done
# a process joins on each host, so both nodes are brought up before the
# servers listen (a listener publishes to nodes that are up)
for i in 0 1; do
	"$TWOHOST" exec $i "$BIN/ntbx" run --fabric $F -- python3 -c \
		'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)'
done
in_port() { for _ in $(seq 300); do "$TWOHOST" exec 0 ss -Hltn "sport = :$1" | grep -q . && return 0; sleep 0.05; done; return 1; }
# pre MODE: the command prefix of a mode (tcp: none)
pre() { [ "$1" = fab ] && echo "env NTBX_LOG=info $BIN/ntbx run --fabric $F --" || true; }

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print 0 }'; }
declare -A BW PP
P=$((PORT + 10))
for r in $(seq "$ROUNDS"); do
	for mode in tcp fab; do
		P=$((P + 1))
		"$TWOHOST" exec 0 $(pre $mode) iperf3 -s -1 -B $H0 -p $P >/dev/null 2>&1 &
		s=$!
		in_port $P || true
		bw=$("$TWOHOST" exec 1 $(pre $mode) iperf3 -c $H0 -p $P -l 128K -t "$SECS" -J 2>"$WORK/ip.err" |
			python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e9))' || echo 0)
		wait $s 2>/dev/null || true
		# the fabric rows must have run on the fabric
		[ $mode = tcp ] || grep -q "path fabric" "$WORK/ip.err" ||
			{ echo "iperf3 round $r did not run on the fabric" >&2; bw=0; }
		BW[$mode]+="$bw "
		P=$((P + 1))
		"$TWOHOST" exec 0 $(pre $mode) sockperf sr --tcp -i $H0 -p $P >/dev/null 2>&1 &
		s=$!
		in_port $P || true
		"$TWOHOST" exec 1 $(pre $mode) sockperf pp --tcp -i $H0 -p $P -m 64 -t "$SECS" --mps=5000000 >"$WORK/sp.out" 2>&1 || true
		pp=$(awk '/percentile 50.000/ {print $NF}' "$WORK/sp.out")
		# (sockperf exits without closing: no per-connection line; a
		# connection that stays on TCP says so when it connects)
		[ $mode = tcp ] || ! grep -q "on TCP\|kernel TCP" "$WORK/sp.out" ||
			{ echo "sockperf round $r did not run on the fabric" >&2; pp=0; }
		kill $s 2>/dev/null || true
		wait $s 2>/dev/null || true
		PP[$mode]+="${pp:-0} "
		echo "round $r $mode: iperf3 $bw GB/s, sockperf p50 ${pp:-?} us" >&2
	done
done
tb=$(echo ${BW[tcp]} | tr ' ' '\n' | median); fb=$(echo ${BW[fab]} | tr ' ' '\n' | median)
tp=$(echo ${PP[tcp]} | tr ' ' '\n' | median); fp=$(echo ${PP[fab]} | tr ' ' '\n' | median)
CSV=$OUT/ofi_sock.csv
{
	echo "test,unit,kernel_tcp,ntbx,ratio,target,rounds_tcp,rounds_ntbx,provider,commit,command"
	echo "iperf3 -l 128K th1->th0,GB/s,$tb,$fb,$(awk -v a=$fb -v b=$tb 'BEGIN{printf "%.2f", b ? a/b : 0}'),>= 1.0x,${BW[tcp]},${BW[fab]},tcp;ofi_rxm,$COMMIT,ntbx run -- iperf3 -c -l 128K -t $SECS"
	echo "sockperf pp 64 B p50 th1->th0,us,$tp,$fp,$(awk -v a=$fp -v b=$tp 'BEGIN{printf "%.2f", b ? a/b : 0}'),<= 0.33x,${PP[tcp]},${PP[fab]},tcp;ofi_rxm,$COMMIT,ntbx run -- sockperf pp --tcp -m 64 -t $SECS"
} >"$CSV"
column -s, -t <"$CSV" | cut -c1-200
