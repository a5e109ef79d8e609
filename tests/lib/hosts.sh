# tests/lib/hosts.sh — what the tests of an ofi fabric across
# ../shared/twohost.sh hosts share.  In a test of tests/ (HERE its folder):
#
#   . "$HERE/lib/hosts.sh" NAME
#       BIN, NTBX, TWOHOST, skip(); skips (77) unless root, with ntbx built
#       with libfabric, twohost.sh and libfabric's tcp RDM provider;
#   (the test's own skips)
#   . "$HERE/lib/twohost_lock.sh"      the hosts are machine-wide state
#   hosts_up
#       WORK (under /var/tmp: /tmp is private per host), ok/bad/show and the
#       counts, the EXIT trap (every pid of BG killed and reaped, the hosts
#       taken down, WORK removed), two hosts up (H0, H1, and H=(H0 H1)),
#       FI_PROVIDER=tcp, NOLEAK, and:
#   on I CMD...                 CMD on host I, with NOLEAK
#   create F I HOSTS [OPTS...]  `ntbx fabric create F --backend ofi --hosts
#                               HOSTS OPTS` on host I ($WORK/create.F.I)
#   agent F I [VAR=VALUE...]    `ntbx node serve` for F on host I, ready
#                               within 10 s (or failed); BG[agent.F.I] is its
#                               pid, $WORK/agent.F.I its log
#   stop KEY [SIGNAL]           kill BG[KEY] (SIGKILL) and reap it
#
# Under the sanitizer build, NOLEAK turns leak checking off for what runs
# with it: libfabric's and libpmix's own leaks are not ours.

HOSTS_TEST=$1
BIN=${NTBX_TEST_BIN:-$HERE/../build/bin}
NTBX=$BIN/ntbx
TWOHOST=${NTBX_TWOHOST:-$(cd "$HERE/../.." && pwd)/shared/twohost.sh}
skip() { echo "SKIP $HOSTS_TEST: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (twohost.sh makes namespaces)"
[ -x "$NTBX" ] || skip "no $NTBX"
ASAN_OPTIONS=detect_leaks=0 "$NTBX" node serve --fabric no-such-fabric-$$ 2>&1 | grep -q "built without libfabric" &&
	skip "ntbx was built without libfabric (scripts/deps.d/ofi.txt)"
[ -x "$TWOHOST" ] || skip "no $TWOHOST (set NTBX_TWOHOST)"
FI_PROVIDER=tcp fi_info -t FI_EP_RDM >/dev/null 2>&1 ||
	skip "libfabric has no tcp RDM provider (fi_info -p tcp)"

hosts_cleanup() {
	local k
	for k in "${!BG[@]}"; do kill -9 "${BG[$k]}" 2>/dev/null || true; done
	for k in "${!BG[@]}"; do { wait "${BG[$k]}"; } 2>/dev/null || true; done
	"$TWOHOST" down >/dev/null 2>&1 || true
	rm -rf "$WORK"
}

hosts_up() {
	WORK=$(mktemp -d "/var/tmp/ntbx-$HOSTS_TEST.XXXXXX")
	declare -gA BG=()
	trap hosts_cleanup EXIT
	pass=0 fail=0
	"$TWOHOST" up 2 >/dev/null
	H0=10.77.0.1 H1=10.77.0.2
	H=("$H0" "$H1")
	export FI_PROVIDER=tcp
	NOLEAK="ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0"
}

ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
show() { sed 's/^/     | /' "$@"; }
on() { local i=$1; shift; "$TWOHOST" exec "$i" env "$NOLEAK" "$@"; }

create() {
	local f=$1 i=$2 hosts=$3
	shift 3
	on "$i" "$NTBX" fabric create "$f" --backend ofi --hosts "$hosts" "$@" >"$WORK/create.$f.$i" 2>&1
}

agent() {
	local f=$1 i=$2 k
	shift 2
	rm -f "$WORK/ready.$f.$i"
	# "$TWOHOST" exec is an exec chain: $! is the agent's pid
	"$TWOHOST" exec "$i" env "$NOLEAK" "$@" "$NTBX" node serve --fabric "$f" --ready "$WORK/ready.$f.$i" \
		>>"$WORK/agent.$f.$i" 2>&1 &
	BG[agent.$f.$i]=$!
	for k in $(seq 200); do
		[ -s "$WORK/ready.$f.$i" ] && return 0
		kill -0 "${BG[agent.$f.$i]}" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

stop() { kill -"${2:-KILL}" "${BG[$1]}" 2>/dev/null || true; { wait "${BG[$1]}"; } 2>/dev/null || true; unset "BG[$1]"; }
