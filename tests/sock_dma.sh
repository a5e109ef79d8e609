#!/usr/bin/env bash
# tests/sock_dma.sh — unmodified programs under `ntbx run` between two
# nodes (two network namespaces joined by veth, so the shadow TCP
# connection has a real path) on a backend that reaches peer windows only
# by DMA (NTBX_DEV_DMA_ONLY=1): every record, credit and sleep flag of the
# queue pairs goes through the DMA engine.  iperf3 one way with bytes
# counted on both ends and by the preload, then a SHA-256-checked stream
# each way at once, each connection checked to have gone over the fabric
# in DMA-only mode.  Root only (namespaces).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_dma
if [ "$(id -u)" != 0 ]; then
	echo "SKIP sock_dma: needs root (network namespaces)"
	exit 0
fi
for t in ip iperf3; do
	command -v $t >/dev/null || { echo "SKIP sock_dma: $t is not installed"; exit 0; }
done
P=ntbxd-$$
NS=($P-a $P-b)
ADDR=(10.213.50.1 10.213.50.2)
ns_cleanup() {
	local_cleanup
	for n in "${NS[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null || true
		ip netns del "$n" 2>/dev/null || true; done
}
trap ns_cleanup EXIT
for i in 0 1; do
	ip netns add "${NS[$i]}"
	ip -n "${NS[$i]}" link set lo up
done
ip link add "$P-0" netns "${NS[0]}" type veth peer name "$P-1" netns "${NS[1]}"
for i in 0 1; do
	ip -n "${NS[$i]}" addr add "${ADDR[$i]}/24" dev "$P-$i"
	ip -n "${NS[$i]}" link set "$P-$i" up
done
export NTBX_FABRIC=sdma NTBX_DEV_DMA_ONLY=1
"$NTBX" fabric create sdma --nodes 2 >/dev/null
# in namespace $1 (each namespace is a node of its own)
nsrun() { local ns=$1; shift; ip netns exec "$ns" env NTBX_LOG=info timeout 120 "$NTBX" run -- "$@"; }
in_port() { # NS PORT: until something listens there (bounded)
	for _ in $(seq 300); do
		ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}
dma_fabric() { # LOGFILE: the program ran DMA-only and a connection used the fabric
	grep -q "DMA-only" "$1" && grep -q "path fabric" "$1"
}

# 1. iperf3 node 1 -> node 0: what the client sent is what the server read
PORT=$(free_port)
nsrun "${NS[0]}" iperf3 -s -1 -B "${ADDR[0]}" -p "$PORT" -J >"$WORK/ips.json" 2>"$WORK/ips.err" &
IP=$!
PIDS+=($IP)
in_port "${NS[0]}" "$PORT" || bad "iperf3 server did not listen"
N=$((256 << 20))
[ "${NTBX_SANITIZED:-0}" = 1 ] && N=$((32 << 20))
nsrun "${NS[1]}" iperf3 -c "${ADDR[0]}" -p "$PORT" -n "$N" -l 128K -J >"$WORK/ipc.json" 2>"$WORK/ipc.err" || true
wait "$IP" || true
# as in sock_e2e.sh: the preload's counts bracket iperf3's own
if dma_fabric "$WORK/ips.err" && dma_fabric "$WORK/ipc.err" &&
   "$PY" "$HERE/sock/iperf_check.py" "$WORK/ipc.json" "$WORK/ips.json" \
	"$WORK/ipc.err" "$WORK/ips.err" "$N"
then ok "iperf3 -n $N -l 128K node 1 -> 0, DMA only: what the client sent is what the server read from the fabric"
else bad "iperf3: $(tail -n3 "$WORK/ipc.err" "$WORK/ips.err")"; fi

# 2. a SHA-256-checked stream each way at once (data and credits cross)
MB=64
[ "${NTBX_SANITIZED:-0}" = 1 ] && MB=8
xfer() { # TAG FROM TO PORT: node FROM sends to node TO
	nsrun "${NS[$3]}" "$PY" "$HERE/sock/xfer.py" recv "${ADDR[$3]}" "$4" 0 >"$WORK/r-$1" 2>"$WORK/r-$1.err" &
	local rp=$!
	in_port "${NS[$3]}" "$4" || true
	nsrun "${NS[$2]}" "$PY" "$HERE/sock/xfer.py" send "${ADDR[$3]}" "$4" "$MB" >"$WORK/s-$1" 2>"$WORK/s-$1.err" || true
	wait $rp || true
}
P1=$(free_port)
P2=$(free_port)
xfer ab 0 1 "$P1" &
x1=$!
xfer ba 1 0 "$P2" &
x2=$!
wait $x1 || true
wait $x2 || true
for t in ab ba; do
	if [ -s "$WORK/s-$t" ] && cmp -s "$WORK/s-$t" "$WORK/r-$t" &&
	   dma_fabric "$WORK/s-$t.err" && dma_fabric "$WORK/r-$t.err"; then
		ok "$MB MB $t, both ways at once, SHA-256 checked, on the fabric DMA only: $(cat "$WORK/r-$t")"
	else
		bad "$MB MB $t: sent $(cat "$WORK/s-$t"), received $(cat "$WORK/r-$t"); $(tail -n2 "$WORK/s-$t.err" "$WORK/r-$t.err")"
	fi
done

echo "sock_dma: $pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
