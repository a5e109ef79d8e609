#!/usr/bin/env bash
# bench/shmem_hosts.sh — OpenSHMEM between two harness hosts on the ofi
# backend (issue 13 item 4), beside raw libfabric in the same run:
#
#   ntbx     bench/shmem/osu.c p2p, 2 PEs (PE 0 on th0, PE 1 on th1) started
#            by mpirun (PMIx): put latency (putmem + quiet), get latency,
#            put bandwidth (windows of 64, then quiet), fetch-add latency;
#            and bench/shmem/osu.c coll with 2 PEs on each host (they share
#            its node): barrier, 8 B broadcast, collect and reduction
#   ofi_raw  bench/ofi_raw th1 -> th0: fi_writedata one-way p50, fi_write
#            bandwidth; both FI_PROVIDER=tcp (tcp;ofi_rxm)
#
# NTBX_SPIN_US, when set, reaches the agents and the PEs (the wait policy).
# Prints the rows for 8 B and 1 MiB and their ratios to the raw peer, writes
# CSV to bench/out/shmem_hosts.csv and the figure bench/out/shmem_hosts.png.
# Hosts from ../shared/twohost.sh, brought up and taken down here under the
# tests' machine-wide lock (tests/lib/twohost_lock.sh).  Needs root,
# libfabric, mpirun, PMIx.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin}
OUT=${BENCH_OUT:-$ROOT/bench/out}
TWOHOST=${NTBX_TWOHOST:-$(cd "$ROOT/.." && pwd)/shared/twohost.sh}
[ "$(id -u)" = 0 ] || { echo "bench/shmem_hosts.sh: SKIP: needs root"; exit 0; }
for t in "$BIN/ofi_raw" "$BIN/ntbx" "$BIN/oshcc" "$TWOHOST"; do
	[ -x "$t" ] || { echo "bench/shmem_hosts.sh: SKIP: no $t"; exit 0; }
done
command -v mpirun >/dev/null || { echo "bench/shmem_hosts.sh: SKIP: no mpirun"; exit 0; }
. "$ROOT/tests/lib/twohost_lock.sh"
mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
WORK=$(mktemp -d /var/tmp/ntbx-shmem-hosts.XXXXXX)
PIDS=()
cleanup() {
	# the run has said everything; what follows is bash reporting the
	# agents and servers killed here as jobs that died of a signal
	exec 2>/dev/null
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	"$TWOHOST" down >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
"$BIN/oshcc" -O2 -o "$WORK/osu" "$ROOT/bench/shmem/osu.c"
"$TWOHOST" up 2 >/dev/null
H0=10.77.0.1 H1=10.77.0.2
PORT=$((45000 + ($$ % 2000) * 2))
export FI_PROVIDER=tcp SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-96M}
wait_file() {
	local i
	for i in $(seq 200); do [ -s "$1" ] && return 0; kill -0 "$2" 2>/dev/null || return 1; sleep 0.05; done
	return 1
}
for i in 0 1; do
	"$TWOHOST" exec $i "$BIN/ntbx" fabric create shb --backend ofi --hosts $H0:$PORT,$H1:$PORT --window 512M >/dev/null
	"$TWOHOST" exec $i "$BIN/ntbx" node serve --fabric shb --ready "$WORK/ready.$i" >"$WORK/agent.$i" 2>&1 &
	PIDS+=($!)
	wait_file "$WORK/ready.$i" $! || { echo "agent $i did not start" >&2; cat "$WORK/agent.$i" >&2; exit 1; }
done
# osu_args PES_PER_HOST: mpirun's arguments for bench/shmem/osu.c, one
# place for the run and for the command the CSV and the output name
osu_args() {
	echo "--mca plm_rsh_agent /run/twohost/bin/ssh --mca oob_tcp_if_include eth0" \
	     "-H th0:$1,th1:$1 -np $((2 * $1)) -x NTBX_SHMEM_FABRIC -x FI_PROVIDER" \
	     "-x SHMEM_SYMMETRIC_SIZE${NTBX_SPIN_US:+ -x NTBX_SPIN_US}"
}
# osu_run PES_PER_HOST MODE ARGS...: bench/shmem/osu.c under mpirun
osu_run() {
	local k=$1
	shift
	"$TWOHOST" exec 0 env NTBX_SHMEM_FABRIC=shb timeout 600 mpirun --allow-run-as-root \
		$(osu_args "$k") "$WORK/osu" "$@" 2>"$WORK/osu.err" ||
		{ echo "osu $* failed:" >&2; cat "$WORK/osu.err" >&2; exit 1; }
}
CMD_SH="NTBX_SHMEM_FABRIC=shb mpirun $(osu_args 1) osu p2p 1"
osu_run 1 p2p 1 >"$WORK/osu.csv"
# the collectives, 2 hosts x 2 PEs (PEs of one host share its node)
CMD_COLL="NTBX_SHMEM_FABRIC=shb mpirun $(osu_args 2) osu coll"
osu_run 2 coll >"$WORK/coll.csv"
for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
PIDS=()

CMD_RAW="ofi_raw -s $H0 (th0); ofi_raw -c $H0 -S 8 -B 1M (th1)"
"$TWOHOST" exec 0 "$BIN/ofi_raw" -s $H0 -p $PORT -r "$WORK/raw.ready" >/dev/null 2>"$WORK/raw.err" &
PIDS+=($!)
wait_file "$WORK/raw.ready" $! || { echo "ofi_raw server did not start" >&2; exit 1; }
"$TWOHOST" exec 1 "$BIN/ofi_raw" -c $H0 -p $PORT -q -S 8 -B 1M >"$WORK/raw.csv" 2>>"$WORK/raw.err" ||
	{ echo "ofi_raw failed" >&2; cat "$WORK/raw.err" >&2; exit 1; }

{
	# the commands hold commas (mpirun -H a,b): quoted
	echo "test,size,value,unit,command,commit"
	grep -E "^(put_lat|get_lat|put_bw|fadd_lat)," "$WORK/osu.csv" | sed "s|\$|,\"$CMD_SH\",$COMMIT|"
	grep -E "^(barrier|bcast_8|collect_8|reduce_8)," "$WORK/coll.csv" | sed "s|\$|,\"$CMD_COLL\",$COMMIT|"
	# ofi_raw's rows (test,size,provider,value,unit) as raw_TEST, the
	# provider in the command
	tail -n +2 "$WORK/raw.csv" | awk -F, -v c="$CMD_RAW" -v k="$COMMIT" \
		'BEGIN { OFS = "," } { print "raw_" $1, $2, $4, $5, "\"" c " [" $3 "]\"", k }'
} >"$OUT/shmem_hosts.csv"
echo "== ntbx OpenSHMEM th0 -> th1 (ofi backend, FI_PROVIDER=tcp), $CMD_SH"
grep -E "^(put_lat|get_lat),8,|^put_bw,1048576,|^fadd_lat," "$WORK/osu.csv"
echo "== ntbx OpenSHMEM collectives, 2 hosts x 2 PEs (size = PEs), $CMD_COLL"
grep -E "^(barrier|bcast_8|collect_8|reduce_8)," "$WORK/coll.csv"
echo "== raw libfabric th1 -> th0, $CMD_RAW"
cat "$WORK/raw.csv"
# against the raw peer of the same run: a put + quiet is a round trip
# (the raw one-way p50 twice), bandwidth against the fi_write loop
awk -F, '$1 == "put_lat" && $2 == 8 { pl = $3 } $1 == "get_lat" && $2 == 8 { gl = $3 }
	$1 == "put_bw" && $2 == 1048576 { bw = $3 / 1000 }
	$1 == "raw_pingpong_p50" { rt = 2 * $3 } $1 == "raw_bw" && $2 == 1048576 { rbw = $3 }
	END { if (rt && rbw) printf "== ratios: 8 B put + quiet %.1fx and get %.1fx the raw round trip (%.2f us); 1 MiB put bandwidth %.2fx raw fi_write\n", pl / rt, gl / rt, rt, bw / rbw }' \
	"$OUT/shmem_hosts.csv"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with matplotlib
"$PY" "$ROOT/bench/plot.py" shmem_hosts "$OUT/shmem_hosts.csv" || echo "no figure (bench/plot.py failed)"
