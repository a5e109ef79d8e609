# bench/timewait.sh — sourced by the short-connection benchmarks.
# Each run leaves its connections' local ports in TIME_WAIT for 60 s
# (thousands per second), and connect()'s search for a free ephemeral port
# slows down as they fill the range: measured (28 Nov), kernel TCP 6845
# conn/s with 42,000 of them left by earlier runs and 3676 with 47,000, the
# fabric (whose shadow is a kernel connection too) 3600 and 1922.  In
# bench/sock.sh the fabric's phase came right after kernel TCP's 20,000 and
# paid for them.  wait_tw_drain: return once at most SOCK_BENCH_TW
# (default 2000) remain, polling, at most 65 s.
wait_tw_drain() {
	local n=0
	for _ in $(seq 130); do
		n=$(ss -Htan state time-wait | wc -l)
		[ "$n" -le "${SOCK_BENCH_TW:-2000}" ] && return 0
		sleep 0.5
	done
	echo "$0: still $n connections in TIME_WAIT (measured anyway)" >&2
}
