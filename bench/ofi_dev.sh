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
#   ntbx      the tools across the hosts (`ntbx TOOL --serve` on th0,
#             `ntbx TOOL` on th1): `ntbx perf` 1 MiB (DMA, 4 in flight) and
#             `ntbx pingpong` 8 B (doorbell: the peer asleep; poll)
#   one host  inside th0, two ofi nodes with FI_PROVIDER=shm (each its own
#             fabric directory, NTBX_SHM_DIR; rank by PMI_RANK) against the
#             shm backend (a 2-node shm fabric): ntbx perf 1 MiB (dma; the
#             shm backend also cpu) and ntbx pingpong 8 B
#
# OFI_ROUNDS rounds (default 3), each value the median of the rounds.  Hosts
# from ../shared/twohost.sh, brought up and taken down here under the tests'
# machine-wide lock (tests/lib/twohost_lock.sh).  CSV: bench/out/ofi_dev.csv, figure
# bench/out/ofi_dev.png (python3-matplotlib).  Needs root.
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
. "$ROOT/tests/lib/twohost_lock.sh"
mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+dirty"
WORK=$(mktemp -d /var/tmp/ntbx-ofi-dev-bench.XXXXXX)
PIDS=()
cleanup() {
	# the run has said everything; what follows is bash reporting the
	# agents and servers killed here as jobs that died of a signal
	exec 2>/dev/null
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
# tool HOST_SERVE HOST_CLIENT TOOL ARGS: `ntbx TOOL --serve` on one host,
# the run on the other (fabric $FAB, environments SENV and CENV), its JSON
# rows to $WORK/tool.out
tool() {
	local hs=$1 hc=$2 t=$3
	shift 3
	"$TWOHOST" exec "$hs" env "${SENV[@]}" timeout 120 "$BIN/ntbx" "$t" --serve --fabric "$FAB" >"$WORK/serve.out" 2>&1 &
	local sp=$!
	"$TWOHOST" exec "$hc" env "${CENV[@]}" timeout 120 "$BIN/ntbx" "$t" --fabric "$FAB" --json "$@" >"$WORK/tool.out" 2>&1 ||
		{ cat "$WORK/tool.out" "$WORK/serve.out" >&2; }
	wait $sp || true
}
jv() { # KEY [FILTER]: the KEY of the first JSON row matching FILTER (python)
	python3 -c 'import json,sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if eval(sys.argv[3]): print(r[sys.argv[2]]); break' "$WORK/tool.out" "$1" "${2:-True}"
}
FAB=$F SENV=() CENV=()
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
	# the tools across the hosts
	tool 0 1 perf --sizes 1M --mode dma --seconds 1.5 --reps 3
	val ntbx_perf_1M "$(jv mbps | awk '{print $1 / 1000}')"
	tool 0 1 pingpong --sizes 8 --iters 5000
	val ntbx_pp_db_p50 "$(jv oneway_ns_p50 'r["mode"]=="doorbell"' | awk '{print $1 / 1000}')"
	val ntbx_pp_db_p99 "$(jv oneway_ns_p99 'r["mode"]=="doorbell"' | awk '{print $1 / 1000}')"
	val ntbx_pp_poll_p50 "$(jv oneway_ns_p50 'r["mode"]=="poll"' | awk '{print $1 / 1000}')"
	val ntbx_pp_poll_p99 "$(jv oneway_ns_p99 'r["mode"]=="poll"' | awk '{print $1 / 1000}')"
	echo "round $r: $(tail -n 17 "$WORK/vals" | tr '\n' ' ')" >&2
done

# One host (th0): FI_PROVIDER=shm between two ofi nodes against the shm
# backend, same tools, same sizes
LP=$((PORT + 200))
for i in 0 1; do
	"${IN0[@]}" mkdir -p /dev/shm/ofi-local-$i
	"${IN0[@]}" env NTBX_SHM_DIR=/dev/shm/ofi-local-$i PMI_RANK=$i "$BIN/ntbx" fabric create loc --backend ofi \
		--hosts $H0:$LP,$H0:$((LP + 10)) >/dev/null
	rm -f "$WORK/lready$i"
	"${IN0[@]}" env FI_PROVIDER=shm NTBX_SHM_DIR=/dev/shm/ofi-local-$i PMI_RANK=$i "$BIN/ntbx" node serve --fabric loc \
		--ready "$WORK/lready$i" >"$WORK/lagent$i.log" 2>&1 &
	PIDS+=($!)
	wait_file "$WORK/lready$i" $! || { cat "$WORK/lagent$i.log"; exit 1; }
done
"${IN0[@]}" "$BIN/ntbx" fabric create shmb --nodes 2 >/dev/null
for r in $(seq "$ROUNDS"); do
	FAB=loc SENV=(NTBX_SHM_DIR=/dev/shm/ofi-local-1 PMI_RANK=1) CENV=(NTBX_SHM_DIR=/dev/shm/ofi-local-0 PMI_RANK=0)
	tool 0 0 perf --sizes 1M --mode dma --seconds 1.5 --reps 3
	val loc_ofi_perf_1M "$(jv mbps | awk '{print $1 / 1000}')"
	tool 0 0 pingpong --sizes 8 --iters 3000
	val loc_ofi_pp_db_p50 "$(jv oneway_ns_p50 'r["mode"]=="doorbell"' | awk '{print $1 / 1000}')"
	val loc_ofi_pp_poll_p50 "$(jv oneway_ns_p50 'r["mode"]=="poll"' | awk '{print $1 / 1000}')"
	for m in dma cpu; do
		"${IN0[@]}" timeout 120 "$BIN/ntbx" perf --fabric shmb --sizes 1M --mode $m --seconds 1.5 --reps 3 --json >"$WORK/tool.out"
		val loc_shm_perf_${m}_1M "$(jv mbps | awk '{print $1 / 1000}')"
	done
	"${IN0[@]}" timeout 120 "$BIN/ntbx" pingpong --fabric shmb --sizes 8 --iters 3000 --json >"$WORK/tool.out"
	val loc_shm_pp_db_p50 "$(jv oneway_ns_p50 'r["mode"]=="doorbell"' | awk '{print $1 / 1000}')"
	val loc_shm_pp_poll_p50 "$(jv oneway_ns_p50 'r["mode"]=="poll"' | awk '{print $1 / 1000}')"
	echo "one host, round $r: $(tail -n 7 "$WORK/vals" | tr '\n' ' ')" >&2
done

med() { awk -F, -v k="$1" '$1==k {print $2}' "$WORK/vals" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
PROV=$(sed -n 's/.*serving with provider \([^ ,]*\).*/\1/p' "$WORK/agent0.log" | head -1)
CSV="$OUT/ofi_dev.csv"
echo "test,what,value,unit,commit,provider" >"$CSV"
row() { echo "$1,$2,$(med "$3"),$4,$COMMIT,${5:-$PROV}" >>"$CSV"; }
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
row perf_1M "ntbx perf (dma)" ntbx_perf_1M GB/s
row pingpong_8B_p50 "ntbx pingpong (doorbell)" ntbx_pp_db_p50 us
row pingpong_8B_p99 "ntbx pingpong (doorbell)" ntbx_pp_db_p99 us
row pingpong_8B_p50 "ntbx pingpong (poll)" ntbx_pp_poll_p50 us
row pingpong_8B_p99 "ntbx pingpong (poll)" ntbx_pp_poll_p99 us
LPROV=$(sed -n 's/.*serving with provider \([^ ,]*\).*/\1/p' "$WORK/lagent0.log" | head -1)
row one_host_perf_1M "ofi backend with FI_PROVIDER=$LPROV (dma)" loc_ofi_perf_1M GB/s "$LPROV"
row one_host_perf_1M "shm backend (dma)" loc_shm_perf_dma_1M GB/s -
row one_host_perf_1M "shm backend (cpu)" loc_shm_perf_cpu_1M GB/s -
row one_host_pingpong_8B_p50 "ofi backend with FI_PROVIDER=$LPROV (doorbell)" loc_ofi_pp_db_p50 us "$LPROV"
row one_host_pingpong_8B_p50 "shm backend (doorbell)" loc_shm_pp_db_p50 us -
row one_host_pingpong_8B_p50 "ofi backend with FI_PROVIDER=$LPROV (poll)" loc_ofi_pp_poll_p50 us "$LPROV"
row one_host_pingpong_8B_p50 "shm backend (poll)" loc_shm_pp_poll_p50 us -
echo "== th1 -> th0, $PROV, median of $ROUNDS rounds, commit $COMMIT"
column -t -s, "$CSV"
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
# Debian's python3 has Debian's matplotlib (python3 on PATH may be another)
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
$PY - "$CSV" "$OUT/ofi_dev.png" "$CPU, $(nproc) CPUs" "$COMMIT" "$ROUNDS" <<'PY'
import csv, sys
csvp, png, cpu, commit, rounds = sys.argv[1:6]
rows = list(csv.DictReader(open(csvp)))
def v(test, what):
    for r in rows:
        if r["test"] == test and r["what"].startswith(what):
            try: return float(r["value"])
            except ValueError: return None
    return None
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no figure: python3-matplotlib is missing (scripts/deps.sh installs it)")
    sys.exit(0)
prov = rows[0]["provider"]
fig, axs = plt.subplots(2, 2, figsize=(13, 7.5))
ax = [axs[0][0], axs[0][1], axs[1][0], axs[1][1]]
def bars(a, items, unit, title, ref=None):
    names = [n for n, x in items]
    vals = [x if x is not None else 0 for n, x in items]
    b = a.barh(range(len(vals)), vals, color=["C0" if i == 0 else "C1" for i in range(len(vals))])
    a.set_yticks(range(len(vals)))
    a.set_yticklabels(names, fontsize=7)
    a.invert_yaxis()
    for i, x in enumerate(vals):
        lab = "%.3g %s" % (x, unit)
        if ref and vals[0] and i:
            lab += "  (%.2fx)" % (x / vals[0])
        a.text(x, i, " " + lab, va="center", fontsize=7)
    a.set_xlim(0, max(vals + [1e-9]) * 1.6)
    a.set_title(title, fontsize=9)
    a.set_xlabel(unit)
bars(ax[0], [("raw fi_writedata one-way", v("pingpong_8B_p50", "raw")),
             ("ntbx pingpong, doorbell", v("pingpong_8B_p50", "ntbx pingpong (doorbell)")),
             ("ntbx pingpong, poll", v("pingpong_8B_p50", "ntbx pingpong (poll)")),
             ("device API doorbell (asleep)", v("pingpong_db_p50", "ofi dev (asleep)"))],
     "us", "8 B one-way p50, th1 <-> th0 (%s)" % prov, ref=True)
bars(ax[1], [("raw fi_write loop", v("bw_1M", "raw")),
             ("ntbx perf --mode dma", v("perf_1M", "ntbx perf")),
             ("device API ntbx_dma_write", v("bw_1M", "ofi dev"))],
     "GB/s", "1 MiB writes, th1 -> th0 (%s)" % prov, ref=True)
bars(ax[2], [("shm backend, ntbx perf --mode dma", v("one_host_perf_1M", "shm backend (dma)")),
             ("shm backend, ntbx perf --mode cpu", v("one_host_perf_1M", "shm backend (cpu)")),
             ("ofi backend, FI_PROVIDER=shm, dma", v("one_host_perf_1M", "ofi backend"))],
     "GB/s", "inside one host (th0): 1 MiB writes", ref=True)
bars(ax[3], [("shm backend, doorbell", v("one_host_pingpong_8B_p50", "shm backend (doorbell)")),
             ("ofi backend, FI_PROVIDER=shm, doorbell", v("one_host_pingpong_8B_p50", "ofi backend with FI_PROVIDER=shm (doorbell)")),
             ("shm backend, poll", v("one_host_pingpong_8B_p50", "shm backend (poll)")),
             ("ofi backend, FI_PROVIDER=shm, poll", v("one_host_pingpong_8B_p50", "ofi backend with FI_PROVIDER=shm (poll)"))],
     "us", "inside one host (th0): ntbx pingpong 8 B one-way p50")
ax[3].set_xscale("symlog", linthresh=1)
fig.suptitle("ntbx on the ofi backend against raw libfabric, two twohost.sh hosts over one veth pair", fontsize=10)
fig.text(0.01, 0.01, "%s | commit %s | median of %s rounds | env OFI_ROUNDS=%s bench/ofi_dev.sh"
         % (cpu, commit, rounds, rounds), fontsize=7)
fig.tight_layout(rect=(0, 0.03, 1, 0.96))
fig.savefig(png, dpi=120)
print("Figure: %s" % png)
PY
