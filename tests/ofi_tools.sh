#!/usr/bin/env bash
# tests/ofi_tools.sh — the ntbx tools between two harness hosts of an ofi
# fabric (../shared/twohost.sh: own network and mount namespaces, joined by
# veth), provider tcp, one `ntbx node serve` per host:
#   1. `ntbx fabric show` on each host names both nodes, the peer up;
#   2. perf, pingpong, qp: `ntbx TOOL --serve` on host 1, `ntbx TOOL` on
#      host 0; exit 0, sane numbers; qp checks every echoed byte;
#   3. ipof: a TUN device per host over the fabric; ping, and a TCP stream
#      each way over the TUN addresses with its SHA-256 checked;
#   4. bad input, each a clear error within its bound: nothing serving on
#      the peer host, the peer serving another tool or another fabric, no
#      agent on this host, no agent on the peer host, --serve on an shm
#      fabric.
# Skips (77) unless root, with ntbx built with libfabric and twohost.sh.
# twohost state is machine-wide: the test takes /tmp/ntbx-test.lock itself.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/hosts.sh" ofi_tools
[ -x "$BIN/ofidev" ] || skip "no $BIN/ofidev"
[ -e /dev/net/tun ] || skip "no /dev/net/tun"
command -v python3 >/dev/null || skip "no python3"
. "$HERE/lib/twohost_lock.sh"
hosts_up
PORT=$((43000 + ($$ % 2000) * 2))

# pair NAME TOOL FABRIC CLIENT_ARGS...: `ntbx TOOL --serve` on host 1,
# `ntbx TOOL` on host 0 (both bounded); exit codes in rs, rc
pair() {
	local name=$1 tool=$2 f=$3
	shift 3
	on 1 timeout 120 "$NTBX" "$tool" --serve --fabric "$f" --timeout 60 >"$WORK/$name.serve" 2>&1 &
	local sp=$!
	rc=0 rs=0
	on 0 timeout 120 "$NTBX" "$tool" --fabric "$f" "$@" >"$WORK/$name.out" 2>&1 || rc=$?
	wait $sp || rs=$?
}

F=tools
create $F 0 $H0:$PORT,$H1:$PORT
create $F 1 $H0:$PORT,$H1:$PORT
# a process of host 0 joins (its bring-up writes node 1's scratchpads)
# before host 1 has an agent: what it wrote must reach node 1 when the
# agents meet, or node 1 never sees the link ready
if agent $F 0 && on 0 "$BIN/ofidev" $F join >"$WORK/join0" 2>&1 && agent $F 1; then
	ok "an agent serves each host (host 0 joined before host 1's agent: $(cat "$WORK/join0"))"
else
	bad "an agent did not become ready"
	show "$WORK"/agent.$F.*
	exit 1
fi

# 1. fabric show on each host: both nodes, the peer's link up (the agent
# brings it up on its own: poll, bounded)
for k in $(seq 100); do
	on 0 "$NTBX" fabric show $F >"$WORK/show0" 2>&1 || true
	on 1 "$NTBX" fabric show $F >"$WORK/show1" 2>&1 || true
	grep -Eq "^ +1 +$H1 +$PORT +peer +up " "$WORK/show0" &&
		grep -Eq "^ +0 +$H0 +$PORT +peer +up " "$WORK/show1" && break
	sleep 0.1
done
if grep -Eq "^ +0 +$H0 +$PORT +this host" "$WORK/show0" && grep -Eq "^ +1 +$H1 +$PORT +peer +up +[0-9]+ +$H1/32 " "$WORK/show0" &&
   grep -Eq "^ +1 +$H1 +$PORT +this host" "$WORK/show1" && grep -Eq "^ +0 +$H0 +$PORT +peer +up +[0-9]+ +$H0/32 " "$WORK/show1" &&
   grep -q "agent running, provider tcp;ofi_rxm" "$WORK/show0"; then
	ok "fabric show names both nodes on each host, the peer up with its address"
else
	bad "fabric show"
	show "$WORK/show0" "$WORK/show1"
fi

# 2. The benchmarks across the hosts.
# perf: sane numbers (0 < MB/s < 100 GB/s) for every size
pair perf perf $F --sizes 4K,64K,1M --seconds 0.2 --reps 1 --json
n=$(python3 - "$WORK/perf.out" <<'PY' 2>/dev/null || echo 0
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sum(1 for r in rows if r["mode"] == "dma" and 0 < r["mbps"] < 1e5))
PY
)
if [ $rc = 0 ] && [ $rs = 0 ] && [ "$n" = 3 ]; then
	ok "perf across hosts: $(python3 -c 'import json,sys; print(", ".join("%s B %.0f MB/s" % (r["size"], r["mbps"]) for r in map(json.loads, open(sys.argv[1]))))' "$WORK/perf.out")"
else
	bad "perf: client exit $rc, serve exit $rs, $n sane rows"
	show "$WORK/perf.out" "$WORK/perf.serve"
fi

# pingpong: doorbell and poll, sane latencies (0 < p50 < 10 ms)
pair pp pingpong $F --sizes 8,4K --iters 300 --json
n=$(python3 - "$WORK/pp.out" <<'PY' 2>/dev/null || echo 0
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sum(1 for r in rows if 0 < r["oneway_ns_p50"] < 10e6 and r["raw_oneway_ns_p50"] > 0))
PY
)
if [ $rc = 0 ] && [ $rs = 0 ] && [ "$n" = 4 ]; then
	ok "pingpong across hosts: $(python3 -c 'import json,sys; print(", ".join("%s B %s %.1f us" % (r["size"], r["mode"], r["oneway_ns_p50"] / 1e3) for r in map(json.loads, open(sys.argv[1]))))' "$WORK/pp.out")"
else
	bad "pingpong: client exit $rc, serve exit $rs, $n sane rows"
	show "$WORK/pp.out" "$WORK/pp.serve"
fi

# qp: a stream and an echo per size, every echoed byte compared
pair qp qp $F --sizes 64,4K,64K --seconds 0.2 --reps 1 --iters 200 --json
n=$(python3 - "$WORK/qp.out" <<'PY' 2>/dev/null || echo 0
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sum(1 for r in rows if r["mbps"] > 0 and 0 < r["oneway_ns_p50"] < 10e6 and r["peer"] == 1))
PY
)
if [ $rc = 0 ] && [ $rs = 0 ] && [ "$n" = 3 ]; then
	ok "qp across hosts (echoes checked byte for byte): $(python3 -c 'import json,sys; print(", ".join("%s B %.0f MB/s %.1f us" % (r["size"], r["mbps"], r["oneway_ns_p50"] / 1e3) for r in map(json.loads, open(sys.argv[1]))))' "$WORK/qp.out")"
else
	bad "qp: client exit $rc, serve exit $rs, $n sane rows"
	show "$WORK/qp.out" "$WORK/qp.serve"
fi

# 3. ipof: a TUN device per host, its link the fabric
for i in 0 1; do
	on $i "$NTBX" ipof up --fabric $F --addr 10.213.40.$((i + 1))/24 --daemon \
		--pidfile "$WORK/ipof.$i.pid" --log "$WORK/ipof.$i.log" >"$WORK/ipof.$i.up" 2>&1 || true
done
# each host sees only its own daemon: its peer node up (bounded: 20 s)
peer_up() { # HOST_INDEX PEER_NODE
	on "$1" "$NTBX" ipof show --fabric $F --json 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if any(p["node"] == int(sys.argv[1]) and p["state"] == "up" for p in o.get("peers", [])):
        sys.exit(0)
sys.exit(1)' "$2"
}
for k in $(seq 200); do
	peer_up 0 1 && peer_up 1 0 && break
	sleep 0.1
done
if peer_up 0 1 && peer_up 1 0; then
	ok "ipof: a daemon per host, each sees the other up: $(cat "$WORK/ipof.0.up")"
else
	bad "ipof daemons did not see each other"
	show "$WORK"/ipof.*.up "$WORK"/ipof.*.log
fi
rc=0
on 0 ping -c 3 -i 0.2 -W 2 10.213.40.2 >"$WORK/ping" 2>&1 || rc=$?
on 0 ping -c 2 -i 0.2 -W 2 -s 30000 10.213.40.2 >>"$WORK/ping" 2>&1 || rc=$?
if [ $rc = 0 ]; then
	ok "ipof: ping over the fabric, 64 B and 30000 B: $(grep -o 'rtt.*' "$WORK/ping" | head -1)"
else
	bad "ipof: ping failed"
	show "$WORK/ping" "$WORK"/ipof.*.log
fi
# a byte stream each way at once, its SHA-256 checked at both ends
cat >"$WORK/xfer.py" <<'PY'
import hashlib, socket, sys
mode, addr, port, mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def block(i):
    return hashlib.sha256(i.to_bytes(8, "little")).digest() * 4096   # 128 KiB
if mode == "recv":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1); s.settimeout(60)
    c, _ = s.accept(); c.settimeout(60)
    h, n = hashlib.sha256(), 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        h.update(b); n += len(b)
    print(n, h.hexdigest())
else:
    c = socket.create_connection((addr, port), timeout=60)
    h, n = hashlib.sha256(), 0
    for i in range(mb * 8):
        b = block(i)
        c.sendall(b); h.update(b); n += len(b)
    c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
    print(n, h.hexdigest())
PY
MB=${OFI_TOOLS_MB:-40}
[ "${NTBX_SANITIZED:-0}" = 1 ] && MB=10
on 1 timeout 120 python3 "$WORK/xfer.py" recv 10.213.40.2 5201 0 >"$WORK/r01" 2>&1 &
R1=$!
on 0 timeout 120 python3 "$WORK/xfer.py" recv 10.213.40.1 5202 0 >"$WORK/r10" 2>&1 &
R0=$!
for k in $(seq 100); do
	on 1 ss -Hltn "sport = :5201" | grep -q . && on 0 ss -Hltn "sport = :5202" | grep -q . && break
	sleep 0.1
done
on 0 timeout 120 python3 "$WORK/xfer.py" send 10.213.40.2 5201 $MB >"$WORK/s01" 2>&1 &
S0=$!
on 1 timeout 120 python3 "$WORK/xfer.py" send 10.213.40.1 5202 $MB >"$WORK/s10" 2>&1 &
S1=$!
wait $S0 $S1 $R0 $R1 || true
if [ -s "$WORK/s01" ] && cmp -s "$WORK/s01" "$WORK/r01" && [ -s "$WORK/s10" ] && cmp -s "$WORK/s10" "$WORK/r10" &&
   [ "$(cut -d' ' -f1 "$WORK/r01")" = $((MB << 20)) ]; then
	ok "ipof: $MB MiB each way at once over TCP on the TUN addresses, SHA-256 equal at both ends"
else
	bad "ipof: streams differ or failed"
	show "$WORK"/s01 "$WORK"/r01 "$WORK"/s10 "$WORK"/r10 "$WORK"/ipof.*.log
fi
for i in 0 1; do
	on $i "$NTBX" ipof down --fabric $F --pidfile "$WORK/ipof.$i.pid" >/dev/null 2>&1 || true
done

# 4. Bad input.
# nothing serves on host 1: refused connections for 10 s, then the reason
rc=0
t0=$(date +%s%N)
on 0 timeout 60 "$NTBX" perf --fabric $F --sizes 4K >"$WORK/noserve" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 1 ] && [ $ms -lt 20000 ] &&
   grep -q "fabric '$F': nothing serves node 1 at its host $H1 port $((PORT + 2)) (start \`ntbx perf --serve --fabric $F\` there first)" "$WORK/noserve"; then
	ok "no --serve on the peer: exit 1 after $ms ms: $(cat "$WORK/noserve")"
else
	bad "no --serve on the peer: exit $rc after $ms ms"
	show "$WORK/noserve"
fi
# another tool serves there
on 1 timeout 60 "$NTBX" pingpong --serve --fabric $F --timeout 30 >"$WORK/tool.serve" 2>&1 &
BG[tsrv]=$!
rc=0
on 0 timeout 60 "$NTBX" perf --fabric $F --sizes 4K >"$WORK/tool.out" 2>&1 || rc=$?
rs=0
wait "${BG[tsrv]}" || rs=$?
unset "BG[tsrv]"
if [ $rc = 1 ] && [ $rs = 1 ] &&
   grep -q "refused: the client asks for \`perf $F\`; this is \`ntbx pingpong --serve --fabric $F\`" "$WORK/tool.out" &&
   grep -q "refused: the client asks for" "$WORK/tool.serve"; then
	ok "another tool serving: both refuse: $(cat "$WORK/tool.out")"
else
	bad "another tool serving: client exit $rc, serve exit $rs"
	show "$WORK/tool.out" "$WORK/tool.serve"
fi

# another fabric serves there (same hosts and ports, another name)
create nmb 1 $H0:$PORT,$H1:$PORT
on 1 timeout 60 "$NTBX" qp --serve --fabric nmb --timeout 30 >"$WORK/nm.serve" 2>&1 &
BG[nsrv]=$!
rc=0
on 0 timeout 60 "$NTBX" qp --fabric $F --sizes 4K >"$WORK/nm.out" 2>&1 || rc=$?
rs=0
wait "${BG[nsrv]}" || rs=$?
unset "BG[nsrv]"
if [ $rc = 1 ] && [ $rs = 1 ] &&
   grep -q "refused: the client asks for \`qp $F\`; this is \`ntbx qp --serve --fabric nmb\`" "$WORK/nm.out"; then
	ok "another fabric serving: refused: $(cat "$WORK/nm.out")"
else
	bad "another fabric serving: client exit $rc, serve exit $rs"
	show "$WORK/nm.out" "$WORK/nm.serve"
fi
# no agent on this host, then no agent on the peer host
G=noag
P2=$((PORT + 10))
create $G 0 $H0:$P2,$H1:$P2
create $G 1 $H0:$P2,$H1:$P2
agent $G 1 || true
rc=0
on 0 timeout 60 "$NTBX" pingpong --fabric $G --sizes 8 >"$WORK/noag0" 2>&1 || rc=$?
if [ $rc = 1 ] && grep -q "no agent serves it on this host; start one with \`ntbx node serve --fabric $G\`" "$WORK/noag0"; then
	ok "no agent on this host: $(cat "$WORK/noag0")"
else
	bad "no agent on this host: exit $rc"
	show "$WORK/noag0"
fi
stop agent.$G.1 TERM
agent $G 0 || true
on 1 timeout 60 "$NTBX" pingpong --serve --fabric $G --timeout 30 >"$WORK/noag1.serve" 2>&1 &
BG[asrv]=$!
rc=0
t0=$(date +%s%N)
on 0 timeout 60 "$NTBX" pingpong --fabric $G --sizes 8 >"$WORK/noag1" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
rs=0
wait "${BG[asrv]}" || rs=$?
unset "BG[asrv]"
if [ $rc = 1 ] && [ $rs = 1 ] && grep -q "node 1's host $H1: .*no agent serves it on this host; start one with \`ntbx node serve --fabric $G\`" "$WORK/noag1"; then
	ok "no agent on the peer host: exit 1 after $ms ms: $(cat "$WORK/noag1")"
else
	bad "no agent on the peer host: client exit $rc, serve exit $rs after $ms ms"
	show "$WORK/noag1" "$WORK/noag1.serve"
fi
stop agent.$G.0 TERM
# --serve where every node is on this machine
rc=0
on 0 "$NTBX" fabric create local --nodes 2 >/dev/null 2>&1 || true
on 0 "$NTBX" perf --serve --fabric local >"$WORK/shmserve" 2>&1 || rc=$?
if [ $rc = 1 ] && grep -q "fabric 'local' has all its nodes on this machine (shm backend): run \`ntbx perf --fabric local\` without --serve" "$WORK/shmserve"; then
	ok "--serve on an shm fabric: $(cat "$WORK/shmserve")"
else
	bad "--serve on an shm fabric: exit $rc"
	show "$WORK/shmserve"
fi

# 5. Transfers larger than the provider's max_msg_size go in pieces:
# agents limited to 3000 bytes (NTBX_OFI_MAX_MSG), queue-pair echoes up to
# 1 MiB compared byte for byte, perf of 1 MiB
S=split
P3=$((PORT + 20))
create $S 0 $H0:$P3,$H1:$P3
create $S 1 $H0:$P3,$H1:$P3
for i in 0 1; do
	rm -f "$WORK/ready.$S.$i"
	"$TWOHOST" exec $i env "$NOLEAK" NTBX_OFI_MAX_MSG=3000 "$NTBX" node serve --fabric $S --ready "$WORK/ready.$S.$i" \
		>>"$WORK/agent.$S.$i" 2>&1 &
	BG[agent.$S.$i]=$!
done
for k in $(seq 200); do [ -s "$WORK/ready.$S.0" ] && [ -s "$WORK/ready.$S.1" ] && break; sleep 0.05; done
pair sqp qp $S --sizes 4K,64K,1M --seconds 0.2 --reps 1 --iters 50 --json
r1=$rc s1=$rs
pair sperf perf $S --sizes 1M --seconds 0.2 --reps 1 --json
if [ $r1 = 0 ] && [ $s1 = 0 ] && [ $rc = 0 ] && [ $rs = 0 ] &&
   grep -q "transfers split at 3000 bytes (NTBX_OFI_MAX_MSG)" "$WORK/agent.$S.0" &&
   [ "$(grep -c '"mbps"' "$WORK/sqp.out")" = 3 ]; then
	ok "writes split at 3000 bytes: qp echoes of 4K, 64K, 1M checked, perf 1 MiB $(python3 -c 'import json,sys; print("%.0f MB/s" % json.loads(open(sys.argv[1]).readline())["mbps"])' "$WORK/sperf.out")"
else
	bad "split writes: qp exit $r1/$s1, perf exit $rc/$rs"
	show "$WORK/sqp.out" "$WORK/sqp.serve" "$WORK/sperf.out" "$WORK/sperf.serve" "$WORK"/agent.$S.*
fi

echo "ofi_tools: $pass passed, $fail failed"
[ "$fail" = 0 ]
