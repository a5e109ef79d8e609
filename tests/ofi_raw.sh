#!/usr/bin/env bash
# tests/ofi_raw.sh — bench/ofi_raw (the raw libfabric peer of issue 13)
# between two harness hosts (../shared/twohost.sh: own network and mount
# namespaces, joined by veth), provider tcp: ping-pong and bandwidth for a
# small count with every transfer's payload checked (-V), both sides exit 0
# and the server counts every transfer it expected; a spoiled byte
# (OFI_RAW_CORRUPT) fails both sides; a missing server, a missing provider and
# bad usage are clear errors within the time bound.
# Skips (77) unless root, with ofi_raw built (libfabric found) and twohost.sh.
# twohost state is machine-wide: the test takes the lock itself
# (tests/lib/twohost_lock.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${NTBX_TEST_BIN:-$HERE/../build/bin}
OFI=$BIN/ofi_raw
TWOHOST=${NTBX_TWOHOST:-$(cd "$HERE/../.." && pwd)/shared/twohost.sh}
skip() { echo "SKIP ofi_raw: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (twohost.sh makes namespaces)"
[ -x "$OFI" ] || skip "no $OFI: libfabric not found at configure time (scripts/deps.d/ofi.txt)"
[ -x "$TWOHOST" ] || skip "no $TWOHOST (set NTBX_TWOHOST)"
FI_PROVIDER=tcp fi_info -t FI_EP_RDM >/dev/null 2>&1 ||
	skip "libfabric has no tcp RDM provider (fi_info -p tcp)"

# /tmp is private per host: the readiness file lives where both see it
. "$HERE/lib/twohost_lock.sh"

WORK=$(mktemp -d /var/tmp/ntbx-ofi_raw.XXXXXX)
SPID=
cleanup() {
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true
	"$TWOHOST" down >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
show() { sed 's/^/     | /' "$@"; }

"$TWOHOST" up 2 >/dev/null
PORT=$((40000 + $$ % 10000))
H0=10.77.0.1
# the sanitizer build checks ofi_raw too, but not libfabric's own leaks
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0

# server NAME [ofi_raw options]: start the server in host 0, wait for its
# ready file (bounded: 10 s, or until it exits).
server() {
	local name=$1
	shift
	rm -f "$WORK/ready"
	"$TWOHOST" exec 0 env FI_PROVIDER=tcp "$OFI" -s $H0 -p $PORT -r "$WORK/ready" "$@" \
		>"$WORK/$name.s.out" 2>"$WORK/$name.s.err" &
	SPID=$!
	local i
	for i in $(seq 200); do
		[ -s "$WORK/ready" ] && return 0
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	bad "$name: the server never became ready"
	show "$WORK/$name.s.err"
	return 1
}
server_wait() { src=0; wait "$SPID" || src=$?; SPID=; }   # its exit status in $src

# 1. The data arrives intact, every transfer checked.
NPP=50
SIZES_PP=8,100,4096,65536
SIZES_BW=4096,65536,1M
if server good -t 10; then
	crc=0
	"$TWOHOST" exec 1 env FI_PROVIDER=tcp "$OFI" -c $H0 -p $PORT -t 10 -V -n $NPP -M 4 \
		-S $SIZES_PP -B $SIZES_BW >"$WORK/good.csv" 2>"$WORK/good.err" || crc=$?
	server_wait
	if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
		ok "client and server exit 0"
	else
		bad "client exit $crc, server exit $src"
		show "$WORK/good.err" "$WORK/good.s.err"
	fi
	rows=$(grep -c '^pingpong_p50,\|^pingpong_p99,\|^bw,' "$WORK/good.csv" || true)
	if head -1 "$WORK/good.csv" | grep -qx 'test,size,provider,value,unit' && [ "$rows" = 11 ] &&
	   ! grep -v '^test,' "$WORK/good.csv" | grep -qv ',tcp;ofi_rxm,[0-9.]*,\(us\|GB/s\)$'; then
		ok "CSV: header and 11 rows, provider tcp;ofi_rxm"
	else
		bad "CSV not as expected ($rows rows)"
		show "$WORK/good.csv"
	fi
	# what the server must have checked: each ping-pong size NPP + NPP/10
	# messages; each bw size its windows x writes per window (ofi_raw's rule:
	# window = clamp(8 MiB / size, 1, 64), windows = max(4, 4 MiB / (window x
	# size)), plus a tenth (at least 1) to warm up)
	want=$(python3 -c '
import sys
npp, pp, bw = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3].split(",")
def b(s): return int(s[:-1]) << 20 if s.endswith("M") else int(s)
n = len(pp) * (npp + max(1, npp // 10))
for s in map(b, bw):
    w = max(1, min(64, (8 << 20) // s)); k = max(4, (4 << 20) // (w * s))
    n += (k + max(1, k // 10)) * w
print(n)' $NPP $SIZES_PP $SIZES_BW)
	if grep -q "tcp;ofi_rxm, $want transfers from th1 (10.77.0.2) checked, 0 mismatches" \
	   "$WORK/good.s.err"; then
		ok "server checked all $want transfers from th1, no mismatch"
	else
		bad "server did not report $want transfers checked"
		show "$WORK/good.s.err"
	fi
	if grep -q "^# data checked: $want transfers at th0 (10.77.0.1), [0-9]* here, no mismatch" \
	   "$WORK/good.err"; then
		ok "client saw the server's count and checked the replies"
	else
		bad "client's summary missing"
		show "$WORK/good.err"
	fi
fi

# 2. A spoiled byte is found: both sides fail and say where.
for seq in 7 46; do   # a ping-pong message (8 B); a bandwidth window (64 KiB writes)
	server corrupt$seq -t 10 || continue
	crc=0
	"$TWOHOST" exec 1 env FI_PROVIDER=tcp OFI_RAW_CORRUPT=$seq "$OFI" -c $H0 -p $PORT \
		-t 10 -V -n 20 -M 4 -S 8,4096 -B 65536 >/dev/null 2>"$WORK/c$seq.err" || crc=$?
	server_wait
	if [ "$crc" = 1 ] && [ "$src" = 1 ] &&
	   grep -q "data mismatch: .*sequence $seq: byte" "$WORK/c$seq.err" &&
	   grep -q "data mismatch: .*sequence $seq: byte" "$WORK/corrupt$seq.s.err"; then
		ok "transfer $seq spoiled: both exit 1 naming it ($(grep -o '[a-z-]* [a-z]*, [0-9]* bytes at offset [0-9]*' "$WORK/c$seq.err" | head -1))"
	else
		bad "transfer $seq spoiled: client exit $crc, server exit $src"
		show "$WORK/c$seq.err" "$WORK/corrupt$seq.s.err"
	fi
done

# 3. Errors are clear and bounded.
t0=$(date +%s%N)
rc=0
"$TWOHOST" exec 1 env FI_PROVIDER=tcp "$OFI" -c $H0 -p $((PORT + 7)) -t 2 \
	>/dev/null 2>"$WORK/noserver.err" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$rc" = 1 ] && [ "$ms" -lt 6000 ] && grep -q "th1.*server 10.77.0.1" "$WORK/noserver.err"; then
	ok "no server: exit 1 after ${ms} ms: $(cat "$WORK/noserver.err")"
else
	bad "no server: exit $rc after $ms ms"
	show "$WORK/noserver.err"
fi
rc=0
"$TWOHOST" exec 0 env FI_PROVIDER=verbs "$OFI" -s $H0 -p $PORT -t 2 \
	>/dev/null 2>"$WORK/noprov.err" || rc=$?
if [ "$rc" = 1 ] && grep -q "th0 (10.77.0.1): provider verbs offers no RDM endpoint at 10.77.0.1" \
   "$WORK/noprov.err"; then
	ok "no such provider: exit 1: $(cat "$WORK/noprov.err")"
else
	bad "no such provider: exit $rc"
	show "$WORK/noprov.err"
fi
rc=0
"$OFI" -s $H0 -c $H0 >/dev/null 2>"$WORK/usage.err" || rc=$?
rc2=0
"$OFI" -c $H0 -S 0 >/dev/null 2>>"$WORK/usage.err" || rc2=$?
if [ "$rc" = 2 ] && [ "$rc2" = 2 ] && grep -q "^usage:" "$WORK/usage.err"; then
	ok "bad usage: exit 2 with the usage"
else
	bad "bad usage: exit $rc, $rc2"
	show "$WORK/usage.err"
fi

echo "ofi_raw: $pass passed, $fail failed"
[ "$fail" = 0 ]
