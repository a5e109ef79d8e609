#!/usr/bin/env bash
# tests/ipof_net.sh — IP over the fabric across network namespaces that this
# test creates (names ntbxt-PID-*; all removed on exit, with their daemons):
#   switch of 3: ping every pair, a 40000-byte ping (the push path), iperf3
#   TCP and UDP with bytes checked from iperf3 -J, a static binary (gcc
#   -static, no libc interposition possible) echoing UDP, an unknown
#   destination dropped and counted, one daemon SIGKILLed and restarted
#   (traffic resumes), `ipof down` removes the interface;
#   ring of 4: node 0 reaches node 2 through node 1's forwarder (2 hops);
#   broadcast dropped and counted; IPv6 between 2 nodes; a foreground
#   daemon logs, ends on SIGINT with exit 0 and removes its interface;
#   without CAP_NET_ADMIN: one line, exit 1.
# Under NTBX_SANITIZED=1: 2 nodes, one ping and one short iperf3 run.
set -euo pipefail

BIN=${NTBX_TEST_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
NTBX="$BIN/ntbx"
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$NTBX" ] || { echo "ipof_net: no $NTBX (build first)" >&2; exit 1; }
# Command-line errors need no root: exit 2 (usage) or 1 (runtime), one line.
cli_rc() { # WANT ARGS...
	local want=$1 rc
	shift
	set +e
	NTBX_SHM_DIR=/nonexistent-ntbx-ipof "$NTBX" "$@" >/dev/null 2>/tmp/ipof-cli-$$.err
	rc=$?
	set -e
	local lines
	lines=$(wc -l </tmp/ipof-cli-$$.err)
	rm -f /tmp/ipof-cli-$$.err
	if [ $rc -eq "$want" ] && [ "$lines" -eq 1 ]; then
		echo "ok   ntbx $* -> exit $rc, one line"
	else
		echo "FAIL ntbx $*: exit $rc (wanted $want), $lines stderr lines"
		exit 1
	fi
}
cli_rc 2 ipof
cli_rc 2 ipof sideways
cli_rc 2 ipof up --mtu 100
cli_rc 2 ipof up --addr 10.1.2.3/40
cli_rc 2 ipof up --addr nonsense
cli_rc 2 ipof up --daemon
cli_rc 2 ipof up --name a/b
cli_rc 2 ipof down --name x --pidfile y
cli_rc 1 ipof show --fabric nosuch
cli_rc 1 ipof down --pidfile /nonexistent-ntbx-ipof.pid
"$NTBX" ipof --help | grep -q "ntbx ipof up" || { echo "FAIL ipof --help"; exit 1; }

. "$HERE/ipof/lib.sh"
ipof_test_begin ipof_net ip iperf3 ping python3 gcc
check() { # NAME CMD...
	local name=$1
	shift
	if "$@" >"$IPOF_WORK/out" 2>&1; then ok "$name"
	else bad "$name: $(tail -3 "$IPOF_WORK/out" | tr '\n' ' ')"; fi
}
show_json() { "$NTBX" ipof show --fabric "$1" --json; }
# field FABRIC NODE PYEXPR: evaluate PYEXPR on that node's show row (o)
field() {
	show_json "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["node"] == int(sys.argv[1]):
        print(eval(sys.argv[2]))
' "$2" "$3"
}

P=ntbxt-$$
PORT=$((20000 + $$ % 20000))
SAN=${NTBX_SANITIZED:-0}

# iperf3 server NS ADDR PORT [iperf3 args]: one test, JSON to a file
iperf_server() {
	ip netns exec "$1" timeout 60 iperf3 -s -1 -B "$2" -p "$3" \
		>"$IPOF_WORK/iperf-s-$3.log" 2>&1 &
	ipof_wait_port "$1" "$3"
}

# -------------------------------------------------- without CAP_NET_ADMIN
"$NTBX" fabric create f2 --nodes 2 >/dev/null
set +e
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
	"$NTBX" ipof up --fabric f2 --name ntbxt$$ >"$IPOF_WORK/out" 2>"$IPOF_WORK/err"
rc=$?
set -e
if [ $rc -eq 1 ] && [ "$(wc -l <"$IPOF_WORK/err")" -eq 1 ] &&
   grep -q "root" "$IPOF_WORK/err"; then
	ok "no CAP_NET_ADMIN: exit 1, one line: $(cat "$IPOF_WORK/err")"
else
	bad "no CAP_NET_ADMIN: exit $rc, stderr: $(cat "$IPOF_WORK/err")"
fi

# ---------------------------------------------------------- switch of 2/3
if [ "$SAN" = 1 ]; then N=2; else N=3; fi
"$NTBX" fabric create sw --nodes $N >/dev/null
NS=()
for i in $(seq 0 $((N - 1))); do
	NS[$i]=$P-s$i
	ipof_ns_add "${NS[$i]}"
	ipof_up "${NS[$i]}" $i 10.213.0.$((i + 1))/24 sw
done
# A fabric that does not exist: one line, exit 1, and no interface left.
set +e
ip netns exec "${NS[0]}" "$NTBX" ipof up --fabric nosuch --name ntbxq \
	>/dev/null 2>"$IPOF_WORK/err"
rc=$?
set -e
if [ $rc -eq 1 ] && [ "$(wc -l <"$IPOF_WORK/err")" -eq 1 ] &&
   ! ip -n "${NS[0]}" link show ntbxq >/dev/null 2>&1; then
	ok "missing fabric: exit 1, one line, no interface left"
else
	bad "missing fabric: exit $rc, $(cat "$IPOF_WORK/err")"
fi
nodes=$(seq -s ' ' 0 $((N - 1)))
check "switch of $N: every daemon sees every peer up" ipof_wait_peers sw $nodes
check "interface ntbx0 up with MTU 65520" \
	sh -c "ip -n ${NS[0]} link show ntbx0 | grep -q 'mtu 65520.*UP\|UP.*mtu 65520'"

for i in $(seq 0 $((N - 1))); do
	for j in $(seq 0 $((N - 1))); do
		[ $i = $j ] && continue
		[ "$SAN" = 1 ] && [ $i = 1 ] && continue
		check "ping node $i -> node $j" ip netns exec "${NS[$i]}" \
			ping -c 2 -i 0.2 -W 3 10.213.0.$((j + 1))
	done
done

tcp_check() { # NAME FROM_NS TO_ADDR TO_NS BYTES
	iperf_server "$4" "$3" $PORT || { bad "$1: iperf3 server did not listen"; return; }
	if ip netns exec "$2" timeout 60 iperf3 -c "$3" -p $PORT -n "$5" -l 128K -J \
		>"$IPOF_WORK/iperf.json" 2>&1 &&
	   python3 - "$IPOF_WORK/iperf.json" "$5" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
s, r = o["end"]["sum_sent"]["bytes"], o["end"]["sum_received"]["bytes"]
# iperf3's receiver total is taken when the sender says it is done, so
# what is still in socket buffers then is not in it: at most 32 MiB.
print("sent", s, "received", r)
sys.exit(0 if s >= want and r <= s and s - r <= (32 << 20) and r > 0 else 1)
PY
	then ok "$1: $(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]; print(e["sum_sent"]["bytes"], "bytes sent,", e["sum_received"]["bytes"], "counted by the receiver")' "$IPOF_WORK/iperf.json")"
	else bad "$1: $(head -c 300 "$IPOF_WORK/iperf.json")"; fi
	wait || true
	PORT=$((PORT + 1))
}

if [ "$SAN" = 1 ]; then
	tcp_check "iperf3 TCP 20 MB node 0 -> 1" "${NS[0]}" 10.213.0.2 "${NS[1]}" 20000000
	echo "ipof_net: sanitizer build: short run (ping + one iperf3)"
	echo "ipof_net: $pass passed, $fail failed"
	[ $fail -eq 0 ]
	exit
fi

check "ping of 40000 bytes (pushed into a posted buffer)" \
	ip netns exec "${NS[0]}" ping -c 2 -i 0.2 -W 3 -s 40000 10.213.0.2
tcp_check "iperf3 TCP 300 MB node 0 -> 1" "${NS[0]}" 10.213.0.2 "${NS[1]}" 300000000
pushed=$(field sw 0 'sum(p["pushed_bytes"] for p in o["peers"])')
if [ "${pushed:-0}" -gt 0 ]; then ok "large packets pushed: $pushed bytes"
else bad "no bytes were pushed (show: $(show_json sw | head -1))"; fi
tcp_check "iperf3 TCP 100 MB node 2 -> 0" "${NS[2]}" 10.213.0.1 "${NS[0]}" 100000000

# UDP: 1000-byte datagrams at 100 Mbit/s for 2 s; the receiver must count
# what arrived (bytes > 0, lost < sent).
iperf_server "${NS[1]}" 10.213.0.2 $PORT
if ip netns exec "${NS[2]}" timeout 60 iperf3 -c 10.213.0.2 -p $PORT -u -b 100M \
	-l 1000 -t 2 -J >"$IPOF_WORK/udp.json" 2>&1 &&
   python3 - "$IPOF_WORK/udp.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
s = o["end"]["sum"]
print("bytes", s["bytes"], "packets", s["packets"], "lost", s["lost_packets"])
sys.exit(0 if s["bytes"] > 0 and s["packets"] > 0 and
         s["lost_packets"] < s["packets"] else 1)
PY
then ok "iperf3 UDP node 2 -> 1: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["end"]["sum"]; print(s["bytes"], "bytes,", s["packets"], "datagrams,", s["lost_packets"], "lost")' "$IPOF_WORK/udp.json")"
else bad "iperf3 UDP: $(head -c 300 "$IPOF_WORK/udp.json")"; fi
wait || true
PORT=$((PORT + 1))

# A static binary: no libc to interpose, so only the device can carry it.
gcc -static -O2 -o "$IPOF_WORK/udpecho" "$HERE/ipof/udpecho.c"
if file "$IPOF_WORK/udpecho" | grep -q "statically linked"; then
	ok "udpecho is statically linked"
else
	bad "udpecho is not static: $(file "$IPOF_WORK/udpecho")"
fi
ip netns exec "${NS[0]}" "$IPOF_WORK/udpecho" server 10.213.0.1 $PORT \
	"$IPOF_WORK/echo.ready" 60 >"$IPOF_WORK/echo-s.log" 2>&1 &
for _ in $(seq 1 200); do [ -f "$IPOF_WORK/echo.ready" ] && break; sleep 0.05; done
check "static binary: 30 UDP echoes of 100 bytes node 2 -> 0" \
	ip netns exec "${NS[2]}" "$IPOF_WORK/udpecho" client 10.213.0.1 $PORT 30 100
check "static binary: 30 UDP echoes of 40000 bytes node 2 -> 0" \
	ip netns exec "${NS[2]}" "$IPOF_WORK/udpecho" client 10.213.0.1 $PORT 30 40000
wait || true
PORT=$((PORT + 1))

# Unknown destination: dropped and counted on the sender, never delivered.
before=$(field sw 0 'o["drop_reasons"]["no_route"]')
ip netns exec "${NS[0]}" ping -c 2 -i 0.2 -W 1 10.213.0.99 >/dev/null 2>&1 && \
	bad "ping to an unknown address got an answer" || true
after=$(field sw 0 'o["drop_reasons"]["no_route"]')
if [ "$after" -ge $((before + 2)) ]; then ok "unknown destination: no_route drops $before -> $after"
else bad "unknown destination: no_route drops $before -> $after"; fi

# Broadcast is dropped and counted (documented: never delivered).
before=$(field sw 0 'o["drop_reasons"]["broadcast"]')
ip netns exec "${NS[0]}" ping -b -c 1 -W 1 10.213.0.255 >/dev/null 2>&1 || true
after=$(field sw 0 'o["drop_reasons"]["broadcast"]')
if [ "$after" -gt "$before" ]; then ok "broadcast: dropped and counted ($before -> $after)"
else bad "broadcast: counter $before -> $after"; fi

# Kill node 1's daemon: its interface goes, peers count it down; restart:
# traffic resumes.
kill -9 "$(cat "$IPOF_WORK/${NS[1]}.pid")"
gone=0
for _ in $(seq 1 200); do
	ip -n "${NS[1]}" link show ntbx0 >/dev/null 2>&1 || { gone=1; break; }
	sleep 0.05
done
[ $gone = 1 ] && ok "SIGKILL: node 1's interface is gone" || bad "SIGKILL: ntbx0 stayed"
down=0
for _ in $(seq 1 200); do
	[ "$(field sw 0 '[p["state"] for p in o["peers"] if p["node"] == 1][0]')" != up ] && { down=1; break; }
	sleep 0.05
done
[ $down = 1 ] && ok "node 0 sees node 1 down" || bad "node 0 still sees node 1 up"
set +e
ip netns exec "${NS[0]}" ping -c 1 -W 1 10.213.0.2 >/dev/null 2>&1
set -e
pd=$(field sw 0 'o["drop_reasons"]["peer_down"] + o["drop_reasons"]["no_route"]')
[ "$pd" -ge 1 ] && ok "packets for the dead node are dropped and counted ($pd)" \
	|| bad "no drop counted for the dead node"
ipof_up "${NS[1]}" 1 10.213.0.2/24 sw
check "restarted daemon: peers up again" ipof_wait_peers sw 0 1 2
check "ping node 0 -> 1 after the restart" ip netns exec "${NS[0]}" \
	ping -c 2 -i 0.2 -W 3 10.213.0.2
tcp_check "iperf3 TCP 50 MB node 0 -> 1 after the restart" "${NS[0]}" 10.213.0.2 "${NS[1]}" 50000000
check "node 0's log has one line for node 1 going down" \
	sh -c "[ \$(grep -c 'peer node 1 down' '$IPOF_WORK/${NS[0]}.log') -eq 1 ]"

# show: a table, and JSON with the keys
check "ipof show (table)" sh -c "'$NTBX' ipof show --fabric sw | grep -q ntbx0"
# down: by pid file and by name; the interface goes away
check "ipof down --pidfile" ip netns exec "${NS[2]}" "$NTBX" ipof down \
	--pidfile "$IPOF_WORK/${NS[2]}.pid"
check "ipof down --name ntbx0" ip netns exec "${NS[1]}" "$NTBX" ipof down \
	--fabric sw --name ntbx0
check "interfaces removed after down" sh -c \
	"! ip -n ${NS[2]} link show ntbx0 2>/dev/null && ! ip -n ${NS[1]} link show ntbx0 2>/dev/null"
"$NTBX" ipof down --fabric sw --pidfile "$IPOF_WORK/${NS[0]}.pid" >/dev/null

# ------------------------------------------------- ring of 4: 2 hops
"$NTBX" fabric create ring --nodes 4 --topology ring --memory 64M --window 64M >/dev/null
for i in 0 1 2 3; do
	ns=$P-r$i
	ipof_ns_add "$ns"
	ipof_up "$ns" $i 10.213.1.$((i + 1))/24 ring
done
check "ring of 4: every daemon sees every peer up" ipof_wait_peers ring 0 1 2 3
hops=$(field ring 0 '[p["hops"] for p in o["peers"] if p["node"] == 2][0]')
[ "$hops" = 2 ] && ok "ring: node 0 -> node 2 is 2 hops" || bad "ring: hops $hops"
check "ring: ping node 0 -> node 2 (forwarded by node 1 or 3)" \
	ip netns exec $P-r0 ping -c 3 -i 0.2 -W 3 10.213.1.3
check "ring: 40000-byte ping node 0 -> node 2" \
	ip netns exec $P-r0 ping -c 2 -i 0.2 -W 3 -s 40000 10.213.1.3
tcp_check "ring: iperf3 TCP 50 MB node 0 -> node 2" $P-r0 10.213.1.3 $P-r2 50000000

# ------------------------------------------------- IPv6, 2 nodes
"$NTBX" fabric create v6 --nodes 2 >/dev/null
for i in 0 1; do
	ipof_ns_add $P-6$i
	ipof_up $P-6$i $i fd00:213::$((i + 1))/64 v6
done
check "IPv6: peers up" ipof_wait_peers v6 0 1
check "IPv6: ping fd00:213::2 (after duplicate address detection)" \
	sh -c "for i in \$(seq 1 50); do ip netns exec $P-60 ping -6 -c 1 -W 1 fd00:213::2 >/dev/null 2>&1 && exit 0; done; exit 1"
check "IPv6: 40000-byte ping" ip netns exec $P-60 ping -6 -c 2 -i 0.2 -W 3 -s 40000 fd00:213::2

# ------------------------------------------------- foreground, SIGINT
"$NTBX" fabric create fg --nodes 2 >/dev/null
ipof_ns_add $P-fg
ip netns exec $P-fg "$NTBX" ipof up --fabric fg --addr 10.213.3.1/24 --name ntbxfg \
	>"$IPOF_WORK/fg.out" 2>"$IPOF_WORK/fg.log" &
FG=$!
for _ in $(seq 1 200); do
	grep -q "ntbxfg up" "$IPOF_WORK/fg.log" 2>/dev/null && break
	sleep 0.05
done
check "foreground: the log says the interface is up" grep -q "ntbxfg up: mtu 65520" "$IPOF_WORK/fg.log"
kill -INT $FG
set +e
wait $FG
rc=$?
set -e
if [ $rc -eq 0 ] && grep -q "ntbxfg going down" "$IPOF_WORK/fg.log" &&
   ! ip -n $P-fg link show ntbxfg >/dev/null 2>&1; then
	ok "foreground: SIGINT ends it (exit 0), interface removed"
else
	bad "foreground: exit $rc; log: $(tail -2 "$IPOF_WORK/fg.log")"
fi

if [ $fail -ne 0 ]; then
	for f in "$IPOF_WORK"/*.log; do
		echo "--- ${f##*/} (last lines)"
		tail -15 "$f"
	done
fi
echo "ipof_net: $pass passed, $fail failed"
[ $fail -eq 0 ]
