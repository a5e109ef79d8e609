#!/usr/bin/env bash
# tests/ofi_dev.sh — the ofi backend (issue 13) at the device API, between two
# harness hosts (../shared/twohost.sh: own network and mount namespaces, joined
# by veth), provider tcp:
#   1. bring-up: `ntbx fabric create --backend ofi --hosts` on each host, one
#      `ntbx node serve` each; the link comes up on both sides;
#   2. scratchpads (RMA write, RMA read), doorbells (remote CQ data), a 1 MiB
#      DMA write from private memory (staged) and 64 KiB from node memory
#      (zero copy), read back, every byte checked on both sides; a child kept
#      with ntbx_dev_fork_* reads by DMA and rings on a queue of its own;
#   3. a process with no agent on its host is refused, naming the fix;
#   4. kill -9 of one agent: the peer sees link-down within 3 s (heartbeat
#      100 ms, silence 1 s), a doorbell then reports -ENOLINK; the agent comes
#      back and the link with it;
#   5. bad input, each a clear error within its bound: another key, another
#      layout, another fabric name, an unreachable host, a provider that
#      offers no RDM endpoint;
#   6. agents launched by mpirun meet through PMIx (when built with PMIx).
# Helpers: tests/ofi/ofidev.c (build/bin/ofidev).  Skips (77) unless root, with
# ntbx built with libfabric and twohost.sh (tests/lib/hosts.sh).  twohost
# state is machine-wide: the test takes the lock itself.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/hosts.sh" ofi_dev
OFIDEV=$BIN/ofidev
[ -x "$OFIDEV" ] || skip "no $OFIDEV"
. "$HERE/lib/twohost_lock.sh"
hosts_up
PORT=$((41000 + ($$ % 4000) * 2))
# the sanitizer build: ofidev (libntbx only) is checked for leaks too; the
# ntbx command runs with NOLEAK

# 1. Bring-up.
F=ofit
if create $F 0 $H0:$PORT,$H1:$PORT && create $F 1 $H0:$PORT,$H1:$PORT &&
   grep -q "created fabric $F: 2 hosts (ofi backend)" "$WORK/create.$F.0"; then
	ok "fabric create --backend ofi --hosts on both hosts"
else
	bad "fabric create"
	show "$WORK"/create.$F.*
fi
if agent $F 0 && agent $F 1; then
	ok "an agent serves each host"
else
	bad "an agent did not become ready"
	show "$WORK"/agent.$F.*
fi
u0=0 u1=0
"$TWOHOST" exec 0 "$OFIDEV" $F up 10000 >"$WORK/up0" 2>&1 || u0=$?
"$TWOHOST" exec 1 "$OFIDEV" $F up 10000 >"$WORK/up1" 2>&1 || u1=$?
if [ $u0 = 0 ] && [ $u1 = 0 ] && grep -q "node 0: link to node 1 up" "$WORK/up0" &&
   grep -q "node 1: link to node 0 up" "$WORK/up1"; then
	ok "link up both ways: $(cat "$WORK/up0")"
else
	bad "link not up (exit $u0, $u1)"
	show "$WORK/up0" "$WORK/up1" "$WORK"/agent.$F.*
fi

"$TWOHOST" exec 1 env "$NOLEAK" "$NTBX" fabric show $F >"$WORK/show1" 2>&1 || true
if grep -q "fabric $F: ofi backend, 2 hosts; agent running, provider tcp;ofi_rxm" "$WORK/show1" &&
   grep -Eq "^ +0 +$H0 +$PORT +peer +up " "$WORK/show1" &&
   grep -Eq "^ +1 +$H1 +$PORT +this host" "$WORK/show1"; then
	ok "fabric show on host 1: node 0 up, node 1 this host"
else
	bad "fabric show"
	show "$WORK/show1"
fi

# 2. Scratchpads, doorbells, DMA, bytes checked.
"$TWOHOST" exec 1 "$OFIDEV" $F b >"$WORK/b.out" 2>&1 &
BP=$!
ra=0 rb=0
"$TWOHOST" exec 0 "$OFIDEV" $F a >"$WORK/a.out" 2>&1 || ra=$?
wait $BP || rb=$?
if [ $ra = 0 ] && [ $rb = 0 ] && grep -q "1048576 bytes verified" "$WORK/b.out"; then
	ok "$(cat "$WORK/a.out"); $(cat "$WORK/b.out")"
else
	bad "round trips: a exit $ra, b exit $rb"
	show "$WORK/a.out" "$WORK/b.out" "$WORK"/agent.$F.*
fi

# a child kept with ntbx_dev_fork_* has a queue of its own to the agent
"$TWOHOST" exec 1 "$OFIDEV" $F fork-b >"$WORK/fb.out" 2>&1 &
BP=$!
ra=0 rb=0
"$TWOHOST" exec 0 "$OFIDEV" $F fork-a >"$WORK/fa.out" 2>&1 || ra=$?
wait $BP || rb=$?
if [ $ra = 0 ] && [ $rb = 0 ]; then
	ok "fork: $(cat "$WORK/fa.out"); $(cat "$WORK/fb.out")"
else
	bad "fork: a exit $ra, b exit $rb"
	show "$WORK/fa.out" "$WORK/fb.out"
fi

# 3. No agent on this host: refused, naming the fix.
create noag 0 $H0:$((PORT + 10)),$H1:$((PORT + 10))
rc=0
"$TWOHOST" exec 0 "$OFIDEV" noag noagent >"$WORK/noag" 2>&1 || rc=$?
if [ $rc = 0 ] && grep -q "no agent serves it on this host; start one with \`ntbx node serve --fabric noag\`" "$WORK/noag"; then
	ok "no agent: $(cat "$WORK/noag")"
else
	bad "no agent: exit $rc"
	show "$WORK/noag"
fi

# 4. Kill an agent: link-down for the peer within the bound, then back.
# a process on each host holds the device open while host 0's agent dies
"$TWOHOST" exec 1 "$OFIDEV" $F down 10000 >"$WORK/down.out" 2>&1 &
DP=$!
"$TWOHOST" exec 0 "$OFIDEV" $F down 10000 >"$WORK/down0.out" 2>&1 &
DP0=$!
for k in $(seq 200); do
	grep -q '^up$' "$WORK/down.out" && grep -q '^up$' "$WORK/down0.out" && break
	kill -0 $DP 2>/dev/null && kill -0 $DP0 2>/dev/null || break
	sleep 0.05
done
t0=$(date +%s%N)
stop agent.$F.0
rd=0 rd0=0
wait $DP || rd=$?
wait $DP0 || rd0=$?
t1=$(sed -n 's/^down \([0-9]*\):.*/\1/p' "$WORK/down.out")
t10=$(sed -n 's/^down \([0-9]*\):.*/\1/p' "$WORK/down0.out")
if [ $rd = 0 ] && [ -n "$t1" ] && [ $(((t1 - t0) / 1000000)) -lt 3000 ]; then
	ok "agent of host 0 killed: host 1 saw link-down after $(((t1 - t0) / 1000000)) ms ($(sed -n 's/^down [0-9]*: //p' "$WORK/down.out")), a doorbell then gives -ENOLINK"
else
	bad "link-down after kill: exit $rd"
	show "$WORK/down.out" "$WORK"/agent.$F.*
fi
if [ $rd0 = 0 ] && [ -n "$t10" ] && [ $(((t10 - t0) / 1000000)) -lt 1500 ]; then
	ok "a process of host 0 saw its agent die (the kernel dropped its lock) after $(((t10 - t0) / 1000000)) ms"
else
	bad "host 0's process after its agent died: exit $rd0"
	show "$WORK/down0.out"
fi
"$TWOHOST" exec 1 env "$NOLEAK" "$NTBX" fabric show $F >"$WORK/show1d" 2>&1 || true
if grep -Eq "^ +0 +$H0 +$PORT +peer +down .*(no word from|cannot reach) node 0's host" "$WORK/show1d"; then
	ok "fabric show on host 1: node 0 down, with the reason"
else
	bad "fabric show after the kill"
	show "$WORK/show1d"
fi
rc=0
"$TWOHOST" exec 0 "$OFIDEV" $F noagent >"$WORK/dead0" 2>&1 || rc=$?
if [ $rc = 0 ]; then
	ok "host 0's own processes see their agent gone at once (open refused)"
else
	bad "host 0 after its agent died: exit $rc"
	show "$WORK/dead0"
fi
u1=0
if agent $F 0 && "$TWOHOST" exec 1 "$OFIDEV" $F up 10000 >"$WORK/up1b" 2>&1; then
	ok "agent restarted: $(cat "$WORK/up1b")"
else
	bad "link not back after the agent restarted"
	show "$WORK/up1b" "$WORK"/agent.$F.*
fi

# the agent stops cleanly on SIGTERM (and tears the endpoint down)
kill -TERM "${BG[agent.$F.1]}"
rc=0
wait "${BG[agent.$F.1]}" || rc=$?
unset "BG[agent.$F.1]"
if [ $rc = 0 ] && grep -q "stopping" "$WORK/agent.$F.1"; then
	ok "SIGTERM: the agent stops, exit 0"
else
	bad "SIGTERM: exit $rc"
	show "$WORK/agent.$F.1"
fi

# 5. Bad input.
# another key: both agents refuse, naming the host and the reason
create keyf 0 $H0:$((PORT + 20)),$H1:$((PORT + 20)) --key one
create keyf 1 $H0:$((PORT + 20)),$H1:$((PORT + 20)) --key two
agent keyf 0 || true
agent keyf 1 || true
rc=0
t0=$(date +%s%N)
"$TWOHOST" exec 0 "$OFIDEV" keyf up 3000 >"$WORK/key.out" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 1 ] && [ $ms -lt 6000 ] && grep -q "another key" "$WORK/key.out" &&
   grep -q "refusing node 1's host $H1: it presents another key" "$WORK/agent.keyf.0"; then
	ok "another key: refused after $ms ms: $(cat "$WORK/key.out")"
else
	bad "another key: exit $rc after $ms ms"
	show "$WORK/key.out" "$WORK"/agent.keyf.*
fi
stop agent.keyf.0
stop agent.keyf.1
# another layout (node memory), another fabric name: refused the same way
create lay 0 $H0:$((PORT + 60)),$H1:$((PORT + 60)) --window 64M --memory 64M
create lay 1 $H0:$((PORT + 60)),$H1:$((PORT + 60))
create nma 0 $H0:$((PORT + 70)),$H1:$((PORT + 70))
create nmb 1 $H0:$((PORT + 70)),$H1:$((PORT + 70))
agent lay 0 || true
agent lay 1 || true
agent nma 0 || true
agent nmb 1 || true
r1=0 r2=0
"$TWOHOST" exec 1 "$OFIDEV" lay up 3000 >"$WORK/lay.out" 2>&1 || r1=$?
"$TWOHOST" exec 0 "$OFIDEV" nma up 3000 >"$WORK/nm.out" 2>&1 || r2=$?
if [ $r1 = 1 ] && grep -q "refused node 0's host $H0: it has another layout: 2 nodes, memory 64M, window 64M (here 2, 256M, 256M)" "$WORK/lay.out" &&
   [ $r2 = 1 ] && grep -q "refused node 1's host $H1: it presents fabric 'nmb', this is fabric 'nma'" "$WORK/nm.out"; then
	ok "another layout, another name: refused: $(cat "$WORK/lay.out"); $(cat "$WORK/nm.out")"
else
	bad "another layout ($r1) or name ($r2) not refused as expected"
	show "$WORK/lay.out" "$WORK/nm.out" "$WORK"/agent.lay.* "$WORK"/agent.nm*
fi
stop agent.lay.0
stop agent.lay.1
stop agent.nma.0
stop agent.nmb.1
# an unreachable host
create unr 0 $H0:$((PORT + 30)),10.77.0.9:$((PORT + 30))
agent unr 0 || true
rc=0
t0=$(date +%s%N)
"$TWOHOST" exec 0 "$OFIDEV" unr up 3000 >"$WORK/unr.out" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 1 ] && [ $ms -lt 6000 ] &&
   grep -q "cannot reach node 1's host 10.77.0.9 port $((PORT + 30))" "$WORK/unr.out"; then
	ok "unreachable host: after $ms ms: $(cat "$WORK/unr.out")"
else
	bad "unreachable host: exit $rc after $ms ms"
	show "$WORK/unr.out" "$WORK"/agent.unr.*
fi
stop agent.unr.0
# a provider that offers no RDM endpoint with RMA here
create prov 0 $H0:$((PORT + 40)),$H1:$((PORT + 40))
rc=0
t0=$(date +%s%N)
timeout 20 "$TWOHOST" exec 0 env "$NOLEAK" FI_PROVIDER=verbs "$NTBX" node serve --fabric prov \
	>"$WORK/prov.out" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 1 ] && grep -q "fabric 'prov' node 0: provider verbs (FI_PROVIDER) offers no RDM endpoint with RMA at $H0" \
   "$WORK/prov.out"; then
	ok "provider verbs: exit 1 after $ms ms: $(cat "$WORK/prov.out")"
else
	bad "provider verbs: exit $rc"
	show "$WORK/prov.out"
fi
# bad command lines
rc=0
env "$NOLEAK" "$NTBX" fabric create x --backend ofi >"$WORK/usage" 2>&1 || rc=$?
rc2=0
env "$NOLEAK" "$NTBX" fabric create x --backend ofi --hosts 10.0.0.1 >>"$WORK/usage" 2>&1 || rc2=$?
if [ $rc = 2 ] && [ $rc2 = 2 ] && grep -q "needs --hosts" "$WORK/usage" &&
   grep -q "names 1 host; a fabric has at least 2" "$WORK/usage"; then
	ok "bad command lines: exit 2 with the reason"
else
	bad "bad command lines: exit $rc, $rc2"
	show "$WORK/usage"
fi

# 6. PMIx: agents launched by Open MPI's mpirun (its PMIx server) meet through
# PMIx_Put/Commit/Fence/Get; the rank is PMIx's.
# (the agent is its own binary, ntbx-node-agent: it, not ntbx, links libpmix)
if command -v mpirun >/dev/null && ldd "$BIN/ntbx-node-agent" | grep -q libpmix; then
	create pmx 0 $H0:$((PORT + 50)),$H1:$((PORT + 50))
	create pmx 1 $H0:$((PORT + 50)),$H1:$((PORT + 50))
	"$TWOHOST" exec 0 env "$NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		mpirun --mca plm_rsh_agent /run/twohost/bin/ssh --mca oob_tcp_if_include eth0 \
		-H th0:1,th1:1 -np 2 -x FI_PROVIDER -x ASAN_OPTIONS \
		"$NTBX" node serve --fabric pmx --ready "$WORK/ready.pmx.%r" \
		>"$WORK/agent.pmx" 2>&1 &
	BG[pmx]=$!
	for k in $(seq 400); do
		[ -s "$WORK/ready.pmx.0" ] && [ -s "$WORK/ready.pmx.1" ] && break
		kill -0 "${BG[pmx]}" 2>/dev/null || break
		sleep 0.05
	done
	u0=0 u1=0
	"$TWOHOST" exec 0 "$OFIDEV" pmx up 10000 >"$WORK/pmx0" 2>&1 || u0=$?
	"$TWOHOST" exec 1 "$OFIDEV" pmx up 10000 >"$WORK/pmx1" 2>&1 || u1=$?
	if [ $u0 = 0 ] && [ $u1 = 0 ] &&
	   [ "$(grep -c "PMIx (namespace .*): 1 of 1 peers' hellos" "$WORK/agent.pmx")" = 2 ]; then
		ok "PMIx: two agents launched by mpirun met through PMIx_Fence: $(cat "$WORK/pmx0")"
	else
		bad "PMIx: links up exit $u0, $u1"
		show "$WORK/pmx0" "$WORK/pmx1" "$WORK/agent.pmx"
	fi
	kill -TERM "${BG[pmx]}" 2>/dev/null || true
	for k in $(seq 200); do kill -0 "${BG[pmx]}" 2>/dev/null || break; sleep 0.05; done
	rc=0
	kill -0 "${BG[pmx]}" 2>/dev/null && rc=1
	wait "${BG[pmx]}" 2>/dev/null || true
	unset "BG[pmx]"
	if [ $rc = 0 ]; then
		ok "PMIx: mpirun and its agents end on SIGTERM"
	else
		bad "PMIx: mpirun still running 10 s after SIGTERM"
	fi
else
	echo "skip PMIx: no mpirun, or ntbx built without PMIx (libpmix-dev)"
fi

echo "ofi_dev: $pass passed, $fail failed"
[ "$fail" = 0 ]
