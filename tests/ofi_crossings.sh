#!/usr/bin/env bash
# tests/ofi_crossings.sh — the work per message on the ofi backend's
# DMA-only queue-pair path, counted by the agents (they log their counts at
# exit): a 64 B ping-pong of N round trips between two programs under
# `ntbx run` on two harness hosts (../shared/twohost.sh), provider tcp.
# Per message each host's agent must execute at most about 2 descriptors
# (the record's body and its sequence word), with the doorbell riding on
# the second write as its CQ data (not a descriptor, an
# fi_inject_writedata and a completion of its own), and receive about one
# CQ data (the peer's doorbell): no sleep flags written before each sleep,
# no credits and doorbell back per message.  Bytes are checked.
# Skips (77) unless root, with ntbx built with libfabric and twohost.sh.
# twohost state is machine-wide: the test takes /tmp/ntbx-test.lock itself.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/hosts.sh" ofi_crossings
command -v python3 >/dev/null || skip "no python3"
. "$HERE/lib/twohost_lock.sh"
hosts_up
PORT=$((43000 + ($$ % 2000) * 2))
N=2000

F=cross
create $F 0 $H0:$PORT,$H1:$PORT
create $F 1 $H0:$PORT,$H1:$PORT
agent $F 0 || { bad "agent on host 0"; show "$WORK/agent.$F.0"; exit 1; }
agent $F 1 || { bad "agent on host 1"; show "$WORK/agent.$F.1"; exit 1; }
# a process joins on each host, so both nodes are up before the server
# listens (a listener publishes to nodes that are up)
for i in 0 1; do
	on $i "$NTBX" run --fabric $F -- python3 -c \
		'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)'
done

P=$((PORT + 10))
on 0 env NTBX_LOG=info timeout 60 "$NTBX" run --fabric $F -- python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    m = b""
    while len(m) < 64:
        b = c.recv(64 - len(m))
        if not b:
            sys.exit(0)
        m += b
    c.sendall(m)
' $H0 $P >"$WORK/server.out" 2>&1 &
BG[server]=$!
for _ in $(seq 200); do on 0 ss -Hltn "sport = :$P" | grep -q . && break; sleep 0.05; done
if on 1 env NTBX_LOG=info timeout 60 "$NTBX" run --fabric $F -- python3 -c '
import socket, sys
n = int(sys.argv[3])
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(n):
    m = (b"%08d" % i) * 8
    c.sendall(m)
    r = b""
    while len(r) < 64:
        b = c.recv(64 - len(r))
        if not b:
            sys.exit("closed after %d round trips" % i)
        r += b
    if r != m:
        sys.exit("round trip %d came back different" % i)
c.close()
print("round trips", n)
' $H0 $P $N >"$WORK/client.out" 2>&1 && grep -q "round trips $N" "$WORK/client.out"; then
	ok "$N round trips of 64 B, every byte back"
else
	bad "ping-pong"; show "$WORK/client.out" "$WORK/server.out"
fi
{ wait "${BG[server]}"; } 2>/dev/null || true
unset "BG[server]"
if grep -q "path fabric" "$WORK/client.out"; then
	ok "the connection ran on the fabric"
else
	bad "the connection did not run on the fabric"; show "$WORK/client.out"
fi

# the agents' counts (logged when they stop)
for i in 0 1; do
	stop agent.$F.$i TERM
	line=$(grep "stopping:" "$WORK/agent.$F.$i" || true)
	[ -n "$line" ] || { bad "host $i: the agent logged no counts"; show "$WORK/agent.$F.$i"; continue; }
	echo "     host $i: ${line#*stopping: }"
	read -r descs writes rode alone cqdata < <(echo "$line" | sed -E \
		's/.*stopping: ([0-9]+) descriptors \(([0-9]+) writes, ([0-9]+) doorbells on a write, ([0-9]+) alone\), [0-9]+ completions, ([0-9]+) CQ data in.*/\1 \2 \3 \4 \5/')
	# each host sent N messages (the client's, or the server's echoes);
	# the bounds leave room for bring-up, the listener's publication
	# and the connection's own set-up and end
	awk -v n=$N -v d="$descs" 'BEGIN { exit !(d <= 2.2 * n) }' &&
		ok "host $i: $descs descriptors for $N messages (<= 2.2 each)" ||
		bad "host $i: $descs descriptors for $N messages (> 2.2 each)"
	awk -v n=$N -v r="$rode" -v a="$alone" 'BEGIN { exit !(r >= 0.95 * n && a <= 0.05 * n) }' &&
		ok "host $i: $rode doorbells rode on a write, $alone went alone" ||
		bad "host $i: $rode doorbells rode on a write, $alone went alone (want >= 95% riding)"
	awk -v n=$N -v c="$cqdata" 'BEGIN { exit !(c <= 1.2 * n + 100) }' &&
		ok "host $i: $cqdata CQ data in for $N messages (heartbeats included)" ||
		bad "host $i: $cqdata CQ data in for $N messages (more than one doorbell each)"
done

echo "ofi_crossings: $pass passed, $fail failed"
[ "$fail" = 0 ]
