#!/usr/bin/env bash
# bench/ipof.sh — IP over the fabric against a veth pair (seed 000's
# "Ethernet"), measured in the same run, between two network namespaces
# each way:
#
#   tcp    iperf3 -c ADDR -t SECS -l 128K (one stream), ipof / veth  (target >= 1.0)
#          IPOF_ROUNDS rounds (default 5), the order alternating; the target
#          is the median of the rounds' ratios (one 5 s run swings +-20% on
#          a shared 2-core machine), and every round is printed
#   udp    ping -c 200 -i 0.005 -q: average round trip, ipof / veth (reported)
#
# ipof: a 2-node fabric, `ntbx ipof up` in each namespace (MTU 65520).
# veth: a veth pair between two other namespaces (MTU 1500 with the
# kernel's segmentation offloads, as a NIC).  IPOF_PERF=1 also records
# `perf record -a -g` during the ipof iperf3 run and prints the top symbols.
# CSV: bench/out/ipof.csv, figure bench/out/ipof.png (bench/plot.py).  Needs root.  Targets are reported, not enforced
# (BENCH_STRICT=1 makes a miss exit 1).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NTBX=${NTBX:-$ROOT/build/bin/ntbx}
OUT=${BENCH_OUT:-$ROOT/bench/out}
SECS=${IPOF_SECS:-5}
[ -x "$NTBX" ] || { echo "bench/ipof.sh: no $NTBX (run make first)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
	echo "bench/ipof.sh: SKIP: needs root (network namespaces, TUN)"; exit 0
fi
for t in iperf3 ping ip python3; do
	command -v $t >/dev/null || { echo "bench/ipof.sh: SKIP: no $t (scripts/deps.sh)"; exit 0; }
done
mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then COMMIT="$COMMIT+dirty"; fi
MACHINE="$(uname -n) $(uname -m) $(nproc)cpu $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)"

NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-ipof-bench.XXXXXX)
export NTBX_SHM_DIR
unset NTBX_FABRIC NTBX_NODE
IPOF_WORK=$(mktemp -d)
. "$ROOT/tests/ipof/lib.sh"
trap ipof_cleanup EXIT
P=ntbxb-$$
PORT=$((20000 + $$ % 20000))

# ipof pair
"$NTBX" fabric create bench --nodes 2 >/dev/null
ipof_ns_add $P-i0
ipof_ns_add $P-i1
ipof_up $P-i0 0 10.213.20.1/24 bench
ipof_up $P-i1 1 10.213.20.2/24 bench
ipof_wait_peers bench 0 1 || { echo "bench/ipof.sh: ipof peers did not come up" >&2; exit 1; }
# veth pair
ipof_ns_add $P-v0
ipof_ns_add $P-v1
ip link add $P-va netns $P-v0 type veth peer name $P-vb netns $P-v1 2>/dev/null ||
	ip link add ntbxbva$$ netns $P-v0 type veth peer name ntbxbvb$$ netns $P-v1
VA=$(ip -n $P-v0 -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1)
VB=$(ip -n $P-v1 -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1)
ip -n $P-v0 addr add 10.213.21.1/24 dev "$VA"
ip -n $P-v1 addr add 10.213.21.2/24 dev "$VB"
ip -n $P-v0 link set "$VA" up
ip -n $P-v1 link set "$VB" up

# tcp NAME SERVER_NS CLIENT_NS ADDR: Gbit/s (receiver), CPU of both ends
tcp() {
	ip netns exec "$2" timeout $((SECS + 30)) iperf3 -s -1 -B "$4" -p $PORT \
		>/dev/null 2>&1 &
	ipof_wait_port "$2" $PORT
	ip netns exec "$3" timeout $((SECS + 30)) iperf3 -c "$4" -p $PORT -t "$SECS" \
		-l 128K -J >"$IPOF_WORK/$1.json"
	wait
	PORT=$((PORT + 1))
	python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["end"]
print("%.2f %.0f %.0f" % (e["sum_received"]["bits_per_second"] / 1e9,
      e["cpu_utilization_percent"]["host_total"],
      e["cpu_utilization_percent"]["remote_total"]))' "$IPOF_WORK/$1.json"
}
# rtt NS ADDR: average round trip in microseconds
rtt() {
	ip netns exec "$1" ping -c 200 -i 0.005 -q "$2" |
		sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p' |
		awk '{printf "%.1f\n", $1 * 1000}'
}

ROUNDS=${IPOF_ROUNDS:-5}
echo "== ipof vs veth: iperf3 TCP, one stream, -l 128K, ${SECS} s, $ROUNDS rounds (order alternates)"
tx_pkts() {
	"$NTBX" ipof show --fabric bench --json | python3 -c '
import json, sys
print(sum(json.loads(l)["tx_pkts"] for l in sys.stdin))'
}
IPOF_LIST= VETH_LIST= RATIO_LIST= PKTS=0
for round in $(seq 1 "$ROUNDS"); do
	for kind in $([ $((round % 2)) = 1 ] && echo "ipof veth" || echo "veth ipof"); do
		if [ $kind = ipof ]; then
			before=$(tx_pkts)
			if [ "${IPOF_PERF:-0}" = 1 ] && [ "$round" = 1 ] &&
			   command -v perf >/dev/null; then
				perf record -a -g -o "$IPOF_WORK/perf.data" -- \
					sleep $((SECS - 1)) >/dev/null 2>&1 &
				PERF_PID=$!
			fi
			read -r G CS CR < <(tcp ipof $P-i1 $P-i0 10.213.20.2)
			PKTS=$((PKTS + $(tx_pkts) - before))
			IPOF_G=$G IPOF_CS=$CS IPOF_CR=$CR
		else
			read -r G CS CR < <(tcp veth $P-v1 $P-v0 10.213.21.2)
			VETH_G=$G VETH_CS=$CS VETH_CR=$CR
		fi
	done
	r=$(python3 -c "print('%.2f' % ($IPOF_G / $VETH_G))")
	printf '  round %d: ipof %6s  veth %6s Gbit/s  ratio %sx  (CPU %% sender/receiver %s/%s, %s/%s)\n' \
		"$round" "$IPOF_G" "$VETH_G" "$r" "$IPOF_CS" "$IPOF_CR" "$VETH_CS" "$VETH_CR"
	IPOF_LIST="$IPOF_LIST $IPOF_G" VETH_LIST="$VETH_LIST $VETH_G" RATIO_LIST="$RATIO_LIST $r"
done
med() { python3 -c 'import statistics, sys; print("%.2f" % statistics.median(map(float, sys.argv[1:])))' "$@"; }
# shellcheck disable=SC2086
{ IPOF_G=$(med $IPOF_LIST); VETH_G=$(med $VETH_LIST); ratio=$(med $RATIO_LIST); }
IPOF_RTT=$(rtt $P-i0 10.213.20.2)
VETH_RTT=$(rtt $P-v0 10.213.21.2)
PPS=$(( PKTS / (SECS * ROUNDS) ))
rratio=$(python3 -c "print('%.2f' % ($IPOF_RTT / $VETH_RTT))")
lo=$(python3 -c 'import sys; print(min(sys.argv[1:], key=float))' $RATIO_LIST)
hi=$(python3 -c 'import sys; print(max(sys.argv[1:], key=float))' $RATIO_LIST)

CMD_I="ip netns exec NS0 iperf3 -c 10.213.20.2 -t $SECS -l 128K  (NS0/NS1 running: ntbx ipof up --fabric F --addr 10.213.20.{1,2}/24)"
CMD_V="ip netns exec NS0 iperf3 -c 10.213.21.2 -t $SECS -l 128K  (NS0/NS1 joined by a veth pair)"
printf '%-34s %10s %10s %8s\n' "" "ipof" "veth" "ratio"
printf '%-34s %10s %10s %8s\n' "TCP Gbit/s, median of $ROUNDS rounds" "$IPOF_G" "$VETH_G" ""
printf '%-34s %10s %10s %8s\n' "median ratio (target >= 1.0x)" "" "" "${ratio}x"
printf '%-34s %10s %10s %8s\n' "ratio range over the rounds" "" "" "${lo}-${hi}x"
printf '%-34s %10s %10s %8s\n' "ping RTT us (avg of 200)" "$IPOF_RTT" "$VETH_RTT" "${rratio}x"
echo "ipof packets/s both ways during the TCP run: $PPS (all TCP segments and ACKs through the TUN devices)"
echo "reproduce: $CMD_I"
echo "           $CMD_V"
echo "           ip netns exec NS0 ping -c 200 -i 0.005 -q 10.213.20.2   (and 10.213.21.2)"
{
	echo "metric,ipof,veth,ratio,target,command,commit,machine"
	echo "tcp_gbps_median,$IPOF_G,$VETH_G,$ratio,>=1.0 (median ratio of $ROUNDS rounds:$RATIO_LIST),\"$CMD_I\",$COMMIT,\"$MACHINE\""
	echo "ping_rtt_us,$IPOF_RTT,$VETH_RTT,$rratio,reported,\"ping -c 200 -i 0.005 -q\",$COMMIT,\"$MACHINE\""
	echo "ipof_pps,$PPS,,,reported,\"ntbx ipof show --json\",$COMMIT,\"$MACHINE\""
} >"$OUT/ipof.csv"
echo "CSV: ${OUT#"$ROOT"/}/ipof.csv"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with matplotlib
"$PY" "$ROOT/bench/plot.py" ipof "$OUT/ipof.csv" || echo "no figure (bench/plot.py failed)"
if [ -n "${PERF_PID:-}" ]; then
	wait "$PERF_PID" || true
	echo "== perf: top symbols, all CPUs, during the first ipof TCP run"
	[ -n "${IPOF_PERF_KEEP:-}" ] && cp "$IPOF_WORK/perf.data" "$IPOF_PERF_KEEP"
	perf report -i "$IPOF_WORK/perf.data" --no-children --sort comm,symbol \
		--stdio 2>/dev/null | grep -E '^ +[0-9]' | head -25
fi
if [ "${BENCH_STRICT:-0}" = 1 ] && python3 -c "import sys; sys.exit(0 if $ratio >= 1.0 else 1)"; then :
elif [ "${BENCH_STRICT:-0}" = 1 ]; then exit 1; fi
