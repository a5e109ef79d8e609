#!/usr/bin/env bash
# bench/ofi.sh — raw libfabric between two harness hosts (issue 13): the
# numbers the ofi backend is held to, beside the network's own.
#
#   ofi_raw     bench/ofi_raw, server in host th0 (10.77.0.1), client in th1,
#               FI_PROVIDER=tcp (tcp;ofi_rxm): fi_writedata ping-pong, one-way
#               p50/p99 per size; fi_write bandwidth windows, GB/s per size
#   kernel TCP  the same veth: sockperf ping-pong (one-way p50/p99; sockperf's
#               smallest message is 14 B, so it stands in for 8 B) and iperf3,
#               one stream, -l SIZE (iperf3 takes at most 1 MiB)
#
# OFI_ROUNDS rounds (default 3), each value the median of the rounds; OFI_SECS
# seconds per kernel run (default 2).  Hosts from ../shared/twohost.sh
# (NTBX_TWOHOST), brought up and taken down here under the machine-wide lock
# the tests take (tests/lib/twohost_lock.sh: taken here unless the caller or
# an ancestor holds it).
# CSV: bench/out/ofi.csv (test,size,provider,value,unit,command,commit,machine);
# figure: bench/out/ofi.png (Debian's python3 with matplotlib).  Needs root.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin}
OFI=$BIN/ofi_raw
OUT=${BENCH_OUT:-$ROOT/bench/out}
TWOHOST=${NTBX_TWOHOST:-$(cd "$ROOT/.." && pwd)/shared/twohost.sh}
ROUNDS=${OFI_ROUNDS:-3}
SECS=${OFI_SECS:-2}
PP_SIZES=${OFI_PP_SIZES:-8,64,512,4096,32768}
BW_SIZES=${OFI_BW_SIZES:-4K,16K,64K,256K,1M,4M}
if [ "$(id -u)" != 0 ]; then
	echo "bench/ofi.sh: SKIP: needs root (twohost.sh makes namespaces)"; exit 0
fi
[ -x "$OFI" ] || { echo "bench/ofi.sh: SKIP: no $OFI (libfabric-dev missing at configure time: scripts/deps.sh, then make)"; exit 0; }
[ -x "$TWOHOST" ] || { echo "bench/ofi.sh: SKIP: no $TWOHOST (set NTBX_TWOHOST)"; exit 0; }
for t in sockperf iperf3 fi_info; do
	command -v $t >/dev/null || { echo "bench/ofi.sh: SKIP: no $t (scripts/deps.sh)"; exit 0; }
done
. "$ROOT/tests/lib/twohost_lock.sh"
mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then COMMIT="$COMMIT+dirty"; fi
MACHINE="$(uname -n) $(uname -m) $(nproc)cpu $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)"
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

# /tmp is private per host: the work directory lives where both hosts see it
WORK=$(mktemp -d /var/tmp/ntbx-ofi-bench.XXXXXX)
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
H0=10.77.0.1
IN0=("$TWOHOST" exec 0)
IN1=("$TWOHOST" exec 1)
PORT=$((40000 + $$ % 10000))

# the provider as fi_info names it at th0's address
PROV_INFO=$("${IN0[@]}" env FI_PROVIDER=tcp fi_info -t FI_EP_RDM -c FI_RMA -s $H0 2>/dev/null |
	awk '/provider:/ {p=$2} /fabric:/ && !f {f=$2} /domain:/ && !d {d=$2} END {print p " (fabric " f ", domain " d ")"}')
FI_VER=$(fi_info --version | sed -n 's/^libfabric: //p')
echo "== raw libfabric th1 -> th0 over veth: FI_PROVIDER=tcp, fi_info: $PROV_INFO, libfabric $FI_VER"

# wait_ready FILE PID: the server's ready file (bounded: 10 s, or its exit)
wait_ready() {
	local i
	for i in $(seq 200); do
		[ -s "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# wait_port HOST PORT: something listens on TCP PORT in host HOST (10 s)
wait_port() {
	local i
	for i in $(seq 200); do
		"$TWOHOST" exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

CMD_OFI="twohost.sh exec 0 env FI_PROVIDER=tcp ofi_raw -s $H0 & twohost.sh exec 1 env FI_PROVIDER=tcp ofi_raw -c $H0 -S $PP_SIZES -B $BW_SIZES"
kernel_size() { [ "$1" -lt 14 ] && echo 14 || echo "$1"; }   # sockperf's minimum
bytes() { "$PY" -c 'import sys; s = sys.argv[1]; print(int(s[:-1]) << {"K": 10, "M": 20}[s[-1]] if s[-1] in "KM" else int(s))' "$1"; }

for round in $(seq "$ROUNDS"); do
	# ---- ofi_raw
	PORT=$((PORT + 2))
	rm -f "$WORK/ready"
	"${IN0[@]}" env FI_PROVIDER=tcp "$OFI" -s $H0 -p $PORT -r "$WORK/ready" \
		>/dev/null 2>"$WORK/server.err" &
	spid=$!
	PIDS+=($spid)
	if ! wait_ready "$WORK/ready" $spid; then
		echo "bench/ofi.sh: ofi_raw server did not start:" >&2
		cat "$WORK/server.err" >&2
		exit 1
	fi
	q=-q
	[ "$round" = 1 ] && q=
	if ! "${IN1[@]}" env FI_PROVIDER=tcp "$OFI" -c $H0 -p $PORT $q -S "$PP_SIZES" -B "$BW_SIZES" \
		>"$WORK/ofi-$round.csv" 2>"$WORK/client.err"; then
		echo "bench/ofi.sh: ofi_raw failed:" >&2
		cat "$WORK/client.err" "$WORK/server.err" >&2
		exit 1
	fi
	wait $spid || { echo "bench/ofi.sh: ofi_raw server failed:" >&2; cat "$WORK/server.err" >&2; exit 1; }
	[ "$round" = 1 ] && sed -n 's/^# /   /p' "$WORK/client.err"
	# ---- kernel TCP over the same veth: sockperf ping-pong
	: >"$WORK/tcp-$round.csv"
	PORT=$((PORT + 2))
	"${IN0[@]}" sockperf sr --tcp -i $H0 -p $PORT >/dev/null 2>&1 &
	PIDS+=($!)
	wait_port 0 $PORT || { echo "bench/ofi.sh: sockperf server did not start" >&2; exit 1; }
	for s in ${PP_SIZES//,/ }; do
		m=$(kernel_size "$(bytes "$s")")
		"${IN1[@]}" sockperf pp --tcp -i $H0 -p $PORT -m "$m" -t "$SECS" --mps=5000000 \
			>"$WORK/sp.out" 2>&1 || true
		awk -v s="$(bytes "$s")" '
			/percentile 50.000/ {p50 = $NF} /percentile 99.000/ {p99 = $NF}
			END {if (p50 != "") {
				print "pingpong_p50," s ",kernel TCP (sockperf)," p50 ",us"
				print "pingpong_p99," s ",kernel TCP (sockperf)," p99 ",us"}}' \
			"$WORK/sp.out" >>"$WORK/tcp-$round.csv"
	done
	kill "${PIDS[-1]}" 2>/dev/null || true
	# ---- and iperf3, one stream
	for s in ${BW_SIZES//,/ }; do
		b=$(bytes "$s")
		[ "$b" -gt 1048576 ] && continue   # iperf3's largest -l
		PORT=$((PORT + 1))
		"${IN0[@]}" iperf3 -s -1 -B $H0 -p $PORT >/dev/null 2>&1 &
		PIDS+=($!)
		wait_port 0 $PORT || { echo "bench/ofi.sh: iperf3 server did not start" >&2; exit 1; }
		"${IN1[@]}" iperf3 -c $H0 -p $PORT -t "$SECS" -l "$b" -J >"$WORK/ip.json" 2>/dev/null || true
		wait "${PIDS[-1]}" 2>/dev/null || true
		"$PY" -c '
import json, sys
try:
    e = json.load(open(sys.argv[1]))["end"]["sum_received"]
    print("bw,%s,kernel TCP (iperf3),%.3f,GB/s" % (sys.argv[2], e["bits_per_second"] / 8e9))
except Exception:
    pass' "$WORK/ip.json" "$b" >>"$WORK/tcp-$round.csv"
	done
	echo "   round $round of $ROUNDS done"
done

CMD_TCP="sockperf sr --tcp -i $H0 & sockperf pp --tcp -i $H0 -m SIZE -t $SECS; iperf3 -s -B $H0 & iperf3 -c $H0 -t $SECS -l SIZE (th0 / th1)"
"$PY" - "$WORK" "$OUT" "$ROUNDS" "$COMMIT" "$MACHINE" "$CMD_OFI" "$CMD_TCP" "$PROV_INFO" "$FI_VER" <<'PY'
import csv, os, statistics, sys
work, out, rounds, commit, machine, cmd_ofi, cmd_tcp, prov_info, fi_ver = sys.argv[1:10]
rounds = int(rounds)
vals = {}      # (test, size, who) -> [values]
prov = "tcp;ofi_rxm"
for r in range(1, rounds + 1):
    for kind in ("ofi", "tcp"):
        path = os.path.join(work, "%s-%d.csv" % (kind, r))
        with open(path) as f:
            for row in csv.reader(f):
                if not row or row[0] == "test":
                    continue
                test, size, p, v, unit = row
                if kind == "ofi":
                    prov = p
                vals.setdefault((test, int(size), kind, unit), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
get = lambda t, s, k: next((v for (tt, ss, kk, u), v in med.items()
                            if tt == t and ss == s and kk == k), None)
fmt = lambda v, f: (f % v) if v is not None else "-"
names = {"ofi": prov, "tcp": None}
# CSV
csvp = os.path.join(out, "ofi.csv")
with open(csvp, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["test", "size", "provider", "value", "unit", "command", "commit", "machine"])
    for (t, s, k, u), v in sorted(med.items(), key=lambda x: (x[0][0], x[0][2], x[0][1])):
        who = prov if k == "ofi" else ("kernel TCP (iperf3)" if t == "bw" else "kernel TCP (sockperf)")
        w.writerow([t, s, who, "%.3f" % v, u, cmd_ofi if k == "ofi" else cmd_tcp, commit, machine])
# table
pp = sorted({s for (t, s, k, u) in med if t.startswith("pingpong")})
bw = sorted({s for (t, s, k, u) in med if t == "bw"})
print("one-way latency, us (median of %d rounds)   %-22s %s" % (rounds, prov, "kernel TCP (sockperf)"))
print("   %-10s %10s %10s %10s %10s %8s" % ("size", "p50", "p99", "p50", "p99", "p50 tcp/ofi"))
for s in pp:
    a, b = get("pingpong_p50", s, "ofi"), get("pingpong_p99", s, "ofi")
    c, d = get("pingpong_p50", s, "tcp"), get("pingpong_p99", s, "tcp")
    r = ("%.2fx" % (c / a)) if a and c else "-"
    print("   %-10s %10s %10s %10s %10s %8s" % ("%d B%s" % (s, " (14)" if s < 14 else ""),
          fmt(a, "%.2f"), fmt(b, "%.2f"), fmt(c, "%.2f"), fmt(d, "%.2f"), r))
print("bandwidth, GB/s (median of %d rounds)       %-22s %s" % (rounds, prov, "kernel TCP (iperf3, 1 stream)"))
for s in bw:
    a, c = get("bw", s, "ofi"), get("bw", s, "tcp")
    r = ("%.2fx" % (a / c)) if a and c else "-"
    print("   %-10s %10s %21s %8s" % ("%d KiB" % (s >> 10), fmt(a, "%.2f"), fmt(c, "%.2f"), r))
print("reproduce: %s" % cmd_ofi)
print("           %s" % cmd_tcp)
print("CSV: %s" % csvp)
# figure
png = os.path.join(out, "ofi.png")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no figure: python3-matplotlib is missing (scripts/deps.sh installs it)")
    sys.exit(0)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.8))
from matplotlib.ticker import ScalarFormatter
for k, label, mk, col in (("ofi", "libfabric %s, fi_writedata" % prov, "o", "C0"),
                          ("tcp", "kernel TCP, sockperf (8 B: 14 B)", "s", "C1")):
    for t, ls in (("pingpong_p50", "-"), ("pingpong_p99", ":")):
        xs = [s for s in pp if get(t, s, k) is not None]
        ax1.plot(xs, [get(t, s, k) for s in xs], mk + ls, color=col,
                 label="%s, %s" % (label, t.split("_")[1]))
ax1.set_xscale("log", base=2)
ax1.set_yscale("log")
ax1.yaxis.set_major_formatter(ScalarFormatter())
ax1.yaxis.set_minor_formatter(ScalarFormatter())
ax1.tick_params(axis="y", which="minor", labelsize=7)
ax1.set_xlabel("message size (bytes)")
ax1.set_ylabel("one-way latency (us)")
ax1.set_title("ping-pong, th1 <-> th0", fontsize=10)
ax1.legend(fontsize=7)
for k, label, mk in (("ofi", "libfabric %s, fi_write window" % prov, "o-"),
                     ("tcp", "kernel TCP, iperf3 -l SIZE, 1 stream", "s-")):
    xs = [s for s in bw if get("bw", s, k) is not None]
    ax2.plot(xs, [get("bw", s, k) for s in xs], mk, label=label)
ax2.set_xscale("log", base=2)
ax2.set_xlabel("write size (bytes)")
ax2.set_ylabel("bandwidth (GB/s)")
ax2.set_ylim(bottom=0)
ax2.set_title("bandwidth, th1 -> th0", fontsize=10)
ax2.legend(fontsize=7)
fig.suptitle("Raw libfabric (FI_PROVIDER=tcp: %s, libfabric %s) and kernel TCP between two "
             "twohost.sh hosts over one veth pair" % (prov_info, fi_ver), fontsize=9)
fig.text(0.01, 0.035, "%s | commit %s | median of %d rounds | bench/ofi.sh" % (machine, commit, rounds),
         fontsize=6)
fig.text(0.01, 0.01, "%s\n%s" % (cmd_ofi, cmd_tcp), fontsize=5)
fig.tight_layout(rect=(0, 0.06, 1, 0.95))
fig.savefig(png, dpi=120)
print("Figure: %s" % png)
PY
