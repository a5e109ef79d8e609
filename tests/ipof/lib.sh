# tests/ipof/lib.sh — helpers for the ipof tests and bench (sourced).
# Needs: NTBX (the ntbx binary), IPOF_WORK (a private directory),
# NTBX_SHM_DIR exported.  Namespaces made here are listed in
# $IPOF_WORK/netns and removed by ipof_cleanup, with every process in them.

# ipof_test_begin NAME TOOL...: what every ipof test does first: skip
# (exit 0, one line) unless root with the tools and /dev/net/tun; a private
# fabric directory and work directory (tests/lib/local.sh; IPOF_WORK is
# WORK), removed after the namespaces at exit; the ok/bad counters.
ipof_test_begin() {
	local name=$1 t
	shift
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP $name: needs root (network namespaces, TUN devices)"
		exit 0
	fi
	for t in "$@"; do
		command -v "$t" >/dev/null || {
			echo "SKIP $name: $t is not installed (scripts/deps.sh)"; exit 0; }
	done
	[ -c /dev/net/tun ] || { echo "SKIP $name: no /dev/net/tun"; exit 0; }
	. "$(dirname "${BASH_SOURCE[0]}")/../lib/local.sh" "$name"
	IPOF_WORK=$WORK
	local_at_exit() { ipof_netns_cleanup; }
	pass=0 fail=0
}
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

ipof_ns_add() { # NAME
	ip netns add "$1"
	echo "$1" >>"$IPOF_WORK/netns"
	ip -n "$1" link set lo up
}

# ipof_up NS NODE CIDR FABRIC [extra args]: start a daemon, wait for it.
ipof_up() {
	local ns=$1 node=$2 cidr=$3 fab=$4
	shift 4
	ip netns exec "$ns" "$NTBX" ipof up --fabric "$fab" --node "$node" \
		--addr "$cidr" --daemon --pidfile "$IPOF_WORK/$ns.pid" \
		--log "$IPOF_WORK/$ns.log" "$@" >/dev/null
}

# ipof_wait_peers FABRIC NODES...: until each listed node's daemon has
# every other listed node up (bounded: 20 s).  Returns 1 on timeout.
ipof_wait_peers() {
	local fab=$1
	shift
	local want="$*"
	for _ in $(seq 1 400); do
		if "$NTBX" ipof show --fabric "$fab" --json 2>/dev/null |
		   python3 -c '
import json, sys
want = [int(x) for x in sys.argv[1].split()]
rows = {}
for l in sys.stdin:
    o = json.loads(l)
    rows[o["node"]] = {p["node"]: p["state"] for p in o["peers"]}
for n in want:
    if n not in rows: sys.exit(1)
    for m in want:
        if m != n and rows[n].get(m) != "up": sys.exit(1)
' "$want"; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# ipof_wait_port NS PORT: until something listens on TCP PORT (10 s).
ipof_wait_port() {
	for _ in $(seq 1 200); do
		ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . &&
			return 0
		sleep 0.05
	done
	return 1
}

# Every namespace made here, with the processes in it.
ipof_netns_cleanup() {
	local ns pid
	if [ -f "$IPOF_WORK/netns" ]; then
		while read -r ns; do
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				kill -9 "$pid" 2>/dev/null || true
			done
		done <"$IPOF_WORK/netns"
		while read -r ns; do
			for _ in $(seq 1 100); do
				[ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
				sleep 0.02
			done
			ip netns del "$ns" 2>/dev/null || true
		done <"$IPOF_WORK/netns"
	fi
}

# The namespaces, then the fabric and work directories (bench/ipof.sh).
ipof_cleanup() {
	ipof_netns_cleanup
	rm -rf "$NTBX_SHM_DIR" "$IPOF_WORK"
}
