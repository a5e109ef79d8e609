#!/usr/bin/env bash
# bench/sock.sh — transparent sockets: unmodified programs over kernel TCP on
# loopback and over the fabric (`ntbx run`, same node) in the same run, each
# result as a ratio fabric / kernel TCP, with the command that reproduces it.
# CSV: bench/out/sock.csv.  About 2 minutes.  SOCK_BENCH_ONLY=iperf|pp|pairs|
# redis|nginx runs one section.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NTBX=$(pwd)/$BUILD/bin/ntbx
[ -x "$NTBX" ] || { echo "bench/sock.sh: no $NTBX (run: make)" >&2; exit 1; }
SECS=${SOCK_BENCH_SECONDS:-3}
mkdir -p bench/out
CSV=bench/out/sock.csv
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-sock-bench.XXXXXX)
export NTBX_SHM_DIR
unset NTBX_FABRIC NTBX_NODE NTBX_SOCK NTBX_SOCK_PORTS NTBX_SOCK_BUF NTBX_LOG
TMP=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$NTBX_SHM_DIR" "$TMP"
}
trap cleanup EXIT
RUN=("$NTBX" run --)
# A random base: other runs of this script on the machine use ports too.
port=${SOCK_BENCH_PORT:-$((27600 + (RANDOM % 200) * 50))}
next_port() { port=$((port + 1)); P=$port; }
wait_port() { for _ in $(seq 300); do ss -Hltn "sport = :$1" | grep -q . && return 0; sleep 0.05; done; return 1; }
start() { # PREFIX... -- server command: starts it in the background
	"$@" >/dev/null 2>&1 &
	PIDS+=($!)
}
stop_last() { local p=${PIDS[-1]}; kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; unset 'PIDS[-1]'; }

echo "bench,metric,unit,kernel_tcp,ntbx_fabric,ratio,better,command" >"$CSV"
printf '%-34s %14s %14s %9s  %s\n' "benchmark" "kernel TCP" "ntbx fabric" "ratio" "target"
row() { # NAME METRIC UNIT TCP FAB BETTER(higher|lower) TARGET CMD
	local r
	r=$(python3 -c "t,f=float('$4'),float('$5'); print('%.2f' % ((f/t) if t else 0))")
	printf '%-34s %14s %14s %8sx  %s\n' "$1" "$4 $3" "$5 $3" "$r" "$7"
	echo "$1,$2,$3,$4,$5,$r,$6,\"$8\"" >>"$CSV"
}

only() { [ -z "${SOCK_BENCH_ONLY:-}" ] || [ "$SOCK_BENCH_ONLY" = "$1" ]; }

# ---- iperf3, one stream, -l 128K and -l 1K
only iperf && for len in 128K 1K; do
	vals=()
	for mode in tcp fab; do
		next_port
		pre=(); [ $mode = fab ] && pre=("${RUN[@]}")
		start "${pre[@]}" iperf3 -s -p $P -B 127.0.0.1
		wait_port $P
		"${pre[@]}" iperf3 -c 127.0.0.1 -p $P -t "$SECS" -l $len -J >"$TMP/ip.json" 2>/dev/null || true
		vals+=("$(python3 -c "import json; print('%.0f' % (json.load(open('$TMP/ip.json'))['end']['sum_received']['bits_per_second']/1e6))" 2>/dev/null || echo 0)")
		stop_last
	done
	row "iperf3 -l $len, 1 stream" throughput Mbit/s "${vals[0]}" "${vals[1]}" higher \
		"$([ $len = 128K ] && echo '>= 3x' || echo '>= 2x')" \
		"ntbx run -- iperf3 -s & ntbx run -- iperf3 -c 127.0.0.1 -t $SECS -l $len"
done

# ---- sockperf ping-pong 64 B (one-way latency p50) and throughput 64 B
if only pp && command -v sockperf >/dev/null; then
	pp=() tp=()
	for mode in tcp fab; do
		next_port
		pre=(); [ $mode = fab ] && pre=("${RUN[@]}")
		start "${pre[@]}" sockperf sr --tcp -i 127.0.0.1 -p $P
		wait_port $P
		# A failed run is reported as 0 (and said), not the end of the bench.
		# --mps: sockperf sizes its table of sequence numbers for at most
		# 1M round trips a second under --mps=max and stops with
		# "_seqN > m_maxSequenceNo" when the fabric goes faster (it does:
		# ~2.7M); an explicit ceiling above that sizes the table to fit.
		pp+=("$( ("${pre[@]}" sockperf pp --tcp -i 127.0.0.1 -p $P -m 64 -t "$SECS" --mps=5000000 2>&1 ||
			echo "sockperf pp ($mode) failed: exit $?" >&2) |
			awk '/percentile 50.000/ {print $NF}')")
		tp+=("$( ("${pre[@]}" sockperf tp --tcp -i 127.0.0.1 -p $P -m 64 -t "$SECS" 2>&1 ||
			echo "sockperf tp ($mode) failed: exit $?" >&2) |
			awk '/Message Rate is/ {for (i=1;i<=NF;i++) if ($i=="is") print $(i+1)}')")
		stop_last
	done
	row "sockperf ping-pong 64 B, p50" latency us "${pp[0]:-0}" "${pp[1]:-0}" lower \
		"<= 0.05x and <= 0.5 us" "ntbx run -- sockperf sr --tcp & ntbx run -- sockperf pp --tcp -m 64 -t $SECS --mps=5000000"
	row "sockperf throughput 64 B" msg_rate msg/s "${tp[0]:-0}" "${tp[1]:-0}" higher \
		">= 8x" "ntbx run -- sockperf sr --tcp & ntbx run -- sockperf tp --tcp -m 64 -t $SECS"
fi

# ---- sockperf ping-pong, one pair, one pair beside a busy loop at nice 19
# (`nice -n 19 yes >/dev/null`: anything else runnable) and PAIRS pairs at
# once (default 4: more processes than CPUs on a small machine).  Each
# pair's p50 and p99 against kernel TCP's pair of the same rank (sorted by
# p99) in the same run: a waiter that spins while others need the CPU, or
# that gives its CPU away for a time slice, shows up here, in the tail.
if only pairs && command -v sockperf >/dev/null; then
	PAIRS=${SOCK_BENCH_PAIRS:-4}
	for set in 1 1+hog "$PAIRS"; do
		n=${set%+hog}
		declare -A res=()
		for mode in tcp fab; do
			pre=(); [ $mode = fab ] && pre=("${RUN[@]}")
			hog=
			if [ "$set" != "$n" ]; then
				nice -n 19 yes >/dev/null &
				hog=$!
			fi
			ports=()
			for i in $(seq "$n"); do
				next_port; ports+=("$P")
				start "${pre[@]}" sockperf sr --tcp -i 127.0.0.1 -p $P
			done
			for P in "${ports[@]}"; do wait_port $P || echo "port $P: no server" >&2; done
			cpids=()
			for i in $(seq "$n"); do
				("${pre[@]}" sockperf pp --tcp -i 127.0.0.1 -p ${ports[i-1]} -m 64 -t "$SECS" \
					--mps=5000000 >"$TMP/pp$mode$i.out" 2>&1 ||
					{ echo "sockperf pp ($mode, pair $i) failed:" >&2
					  tail -n 3 "$TMP/pp$mode$i.out" >&2; }) &
				cpids+=($!)
			done
			for c in "${cpids[@]}"; do wait "$c" || true; done
			for i in $(seq "$n"); do stop_last; done
			if [ -n "$hog" ]; then kill "$hog"; wait "$hog" 2>/dev/null || true; fi
			# one line per pair, "p99 p50", sorted by p99
			res[$mode]=$(for i in $(seq "$n"); do
				awk '/percentile 99.000/ {a=$NF} /percentile 50.000/ {b=$NF}
				     END {print (a==""?0:a), (b==""?0:b)}' "$TMP/pp$mode$i.out"
			done | sort -g)
		done
		mapfile -t tl <<<"${res[tcp]}"
		mapfile -t fl <<<"${res[fab]}"
		cmd="$n x (ntbx run -- sockperf sr --tcp -p P & ntbx run -- sockperf pp --tcp -p P -m 64 -t $SECS --mps=5000000) at once"
		name="$n pair(s)"
		if [ "$set" != "$n" ]; then
			cmd="$cmd, beside nice -n 19 yes >/dev/null"
			name="1 pair+nice19"
		fi
		for i in $(seq 0 $((n - 1))); do
			read -r t99 t50 <<<"${tl[i]}"
			read -r f99 f50 <<<"${fl[i]}"
			row "sockperf pp $name, #$((i + 1)) p50" latency us "${t50:-0}" "${f50:-0}" lower \
				"$([ "$set" = 1 ] && echo '<= 0.15 us' || echo '<= 0.33x')" "$cmd"
			row "sockperf pp $name, #$((i + 1)) p99" latency us "${t99:-0}" "${f99:-0}" lower \
				"$([ "$set" = 1 ] && echo '<= 0.3 us' || echo '<= 1.0x')" "$cmd"
		done
		unset res
	done
fi

# ---- redis-benchmark GET/SET, 50 clients (and a Unix socket beside them)
if only redis && command -v redis-server >/dev/null; then
	declare -A rps p50
	for mode in tcp fab unix; do
		next_port
		pre=(); [ $mode = fab ] && pre=("${RUN[@]}")
		start "${pre[@]}" redis-server --port $P --bind 127.0.0.1 --save "" --appendonly no \
			--unixsocket "$TMP/redis.sock" --dir "$TMP"
		wait_port $P
		conn=(-p $P); [ $mode = unix ] && conn=(-s "$TMP/redis.sock")
		"${pre[@]}" redis-benchmark "${conn[@]}" -c 50 -n 200000 -t set,get --csv >"$TMP/rb.csv" 2>/dev/null || true
		for t in SET GET; do
			rps[$mode$t]=$(awk -F'"' -v t=$t '$2==t {print $4}' "$TMP/rb.csv")
			p50[$mode$t]=$(awk -F'"' -v t=$t '$2==t {print $8}' "$TMP/rb.csv")
		done
		stop_last
		rm -f "$TMP/redis.sock"
	done
	for t in SET GET; do
		cmd="ntbx run -- redis-server & ntbx run -- redis-benchmark -c 50 -n 200000 -t ${t,,}"
		row "redis-benchmark $t, 50 clients" rps req/s "${rps[tcp$t]:-0}" "${rps[fab$t]:-0}" higher ">= 1.5x" "$cmd"
		row "redis-benchmark $t, p50" latency ms "${p50[tcp$t]:-0}" "${p50[fab$t]:-0}" lower "<= 0.5x" "$cmd"
		row "  (Unix socket instead of TCP)" rps req/s "${rps[tcp$t]:-0}" "${rps[unix$t]:-0}" higher "-" \
			"redis-benchmark -s SOCKET -c 50 -t ${t,,}"
	done
fi

# ---- nginx + wrk, 1 KiB responses, keep-alive; short connections
if only nginx && command -v nginx >/dev/null && command -v wrk >/dev/null; then
	mkdir -p "$TMP/www"
	head -c 1024 /dev/urandom >"$TMP/www/1k.bin"
	ka=() sc=()
	for mode in tcp fab; do
		next_port
		pre=(); [ $mode = fab ] && pre=("${RUN[@]}")
		cat >"$TMP/nginx.conf" <<CONF
user root;
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log error;
env NTBX_SHM_DIR;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $TMP/t1; proxy_temp_path $TMP/t2;
    fastcgi_temp_path $TMP/t3; uwsgi_temp_path $TMP/t4; scgi_temp_path $TMP/t5;
    server { listen 127.0.0.1:$P; root $TMP/www; }
}
CONF
		start "${pre[@]}" nginx -c "$TMP/nginx.conf" -e "$TMP/nginx-error.log"
		wait_port $P
		ka+=("$("${pre[@]}" wrk -t 1 -c 10 -d "${SECS}s" "http://127.0.0.1:$P/1k.bin" 2>/dev/null |
			awk '/Requests\/sec/ {print $2}')")
		sc+=("$("${pre[@]}" wrk -t 1 -c 10 -d "${SECS}s" -H "Connection: close" \
			"http://127.0.0.1:$P/1k.bin" 2>/dev/null | awk '/Requests\/sec/ {print $2}')")
		kill -QUIT "${PIDS[-1]}" 2>/dev/null || true
		stop_last
	done
	row "nginx+wrk 1 KiB, keep-alive" rps req/s "${ka[0]:-0}" "${ka[1]:-0}" higher ">= 1.5x" \
		"ntbx run -- nginx & ntbx run -- wrk -t1 -c10 -d${SECS}s URL"
	row "short connections (HTTP/1.0 close)" rps conn/s "${sc[0]:-0}" "${sc[1]:-0}" higher ">= 0.8x" \
		"ntbx run -- wrk -t1 -c10 -d${SECS}s -H 'Connection: close' URL"
fi
echo
echo "CSV: $CSV (machine: $(nproc) CPUs, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
