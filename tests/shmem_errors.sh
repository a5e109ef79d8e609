#!/usr/bin/env bash
# oshrun and libntbx-shmem under misuse and failure: usage errors, exit
# status propagation, a crashing PE, shmem_global_exit, signal forwarding,
# --timeout, non-symmetric addresses, PEs out of range, an exhausted heap,
# SHMEM_INFO, a bad SHMEM_SYMMETRIC_SIZE; C++ through oshc++; a program run
# without oshrun.  Nothing may be left in the fabric directory.
set -uo pipefail
: "${NTBX_TEST_BIN:?set NTBX_TEST_BIN}"
here=$(cd "$(dirname "$0")" && pwd)/shmem
. "$(dirname "$0")/lib/local.sh" shmem_errors
work=$WORK
bgpid=
local_at_exit() { [ -n "$bgpid" ] && kill -KILL "$bgpid" 2>/dev/null; }
export SHMEM_SYMMETRIC_SIZE=8M
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$work/err" ] && head -5 "$work/err"; }
# expect NAME STATUS GREP-STDERR CMD...
expect() {
	local name=$1 want=$2 pat=$3; shift 3
	"$@" >"$work/out" 2>"$work/err"; local rc=$?
	if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, want $want"; return; fi
	if [ -n "$pat" ] && ! grep -q -- "$pat" "$work/err" "$work/out"; then
		bad "$name: no '$pat' in the output"; return; fi
	ok "$name"
}

"$BIN/oshcc" -O1 -Wall -Wextra -Werror -o "$work/misuse" "$here/misc/misuse.c" || { echo "0 passed, 1 failed"; exit 1; }
M=$work/misuse
R=$BIN/oshrun

expect "no program" 2 "no program" "$R" -n 2
[ "$(wc -l <"$work/err")" -eq 1 ] && ok "no program: one line" || bad "no program: one line"
expect "bad PE count" 2 "PE count" "$R" -n 0 "$M"
expect "bad option" 2 "unknown option" "$R" --bogus -n 2 "$M"
expect "ring of 1" 2 "at least 2" "$R" --topology ring -n 1 "$M"
expect "missing program file" 127 "cannot run" "$R" -n 2 "$work/nonexistent"
expect "exit status propagates" 3 "" "$R" -n 4 "$M" exit3
# (the sanitizers turn the SIGSEGV into an abort)
if [ -n "${NTBX_SANITIZED:-}" ]; then crc=134 csig=6; else crc=139 csig=11; fi
expect "crashing PE stops the job" $crc "killed by signal $csig" "$R" -n 4 "$M" crash
expect "shmem_global_exit" 5 "" "$R" -n 4 "$M" gexit
expect "non-symmetric address" 1 "not symmetric" "$R" -n 2 "$M" nonsym
expect "PE out of range" 1 "out of range" "$R" -n 2 "$M" pe
SHMEM_DEBUG=1 expect "heap exhausted: NULL, said under SHMEM_DEBUG" 0 "heap exhausted" "$R" -n 2 "$M" heap
grep -q "^NULL" "$work/out" && ok "heap exhausted returns NULL" || bad "heap exhausted returns NULL"
# The symmetric heap: the default holds 300 MiB (three OSU benchmarks need
# more than 64 MiB); K/M/G suffixes; a heap too small says which variable
# to raise; one larger than the memory file system is refused by name.
env -u SHMEM_SYMMETRIC_SIZE "$R" -n 2 "$M" big >"$work/out" 2>&1
grep -q "big: ok" "$work/out" && ok "default heap holds 300 MiB" || bad "default heap holds 300 MiB"
SHMEM_SYMMETRIC_SIZE=1G "$R" -n 2 "$M" big >"$work/out" 2>&1
grep -q "big: ok" "$work/out" && ok "SHMEM_SYMMETRIC_SIZE=1G" || bad "SHMEM_SYMMETRIC_SIZE=1G"
SHMEM_SYMMETRIC_SIZE=256m SHMEM_DEBUG=1 expect "heap too small: SHMEM_DEBUG names the variable" \
	0 "raise SHMEM_SYMMETRIC_SIZE" "$R" -n 2 "$M" big
grep -q "big: failed" "$work/out" && ok "heap too small: NULL" || bad "heap too small: NULL"
SHMEM_SYMMETRIC_SIZE=100000G expect "heap beyond the memory file system" 2 \
	"SHMEM_SYMMETRIC_SIZE=100000G" "$R" -n 2 "$M"
SHMEM_INFO=1 expect "SHMEM_INFO" 0 "SHMEM_SYMMETRIC_SIZE" "$R" -n 2 "$M"
# each suffix, either case, is the size the library reports
for sz in 40960K:41943040 40960k:41943040 48M:50331648 48m:50331648 1G:1073741824 1g:1073741824 \
          41943040:41943040; do
	SHMEM_SYMMETRIC_SIZE=${sz%%:*} SHMEM_INFO=1 expect "SHMEM_SYMMETRIC_SIZE=${sz%%:*}" 0 \
		"SHMEM_SYMMETRIC_SIZE ${sz#*:} bytes" "$R" -n 2 "$M"
done
SHMEM_SYMMETRIC_SIZE=lots expect "bad SHMEM_SYMMETRIC_SIZE" 2 "not a size" "$R" -n 2 "$M"
expect "--timeout" 124 "timed out" "$R" --timeout 1 -n 2 "$M" sleep
expect "bad --bind-to" 2 "use core or none" "$R" --bind-to socket -n 2 "$M"

# --bind-to: core (a switch's default) gives PE i the i-th allowed CPU,
# round robin; none (a ring's default) leaves each PE every CPU.
all=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
want=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0))
print(" ".join("%d:%d" % (k, c[k % len(c)]) for k in range(3)) + " ")')
got=$("$R" -n 3 sh -c 'echo "$NTBX_NODE:$(grep Cpus_allowed_list /proc/self/status | cut -f2)"' | sort | tr '\n' ' ')
[ "$got" = "$want" ] && ok "--bind-to core by default: $got" || bad "binding: got '$got', wanted '$want'"
got=$("$R" --bind-to none -n 2 sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2' | sort -u)
[ "$got" = "$all" ] && ok "--bind-to none: every CPU ($got)" || bad "--bind-to none: '$got', wanted '$all'"
# A ring by default binds each PE's main thread (at the end of shmem_init),
# round robin, and leaves its transfer and relay threads every CPU; a
# program that is no PE is not bound.  (A PE lets go of its pin while it
# sees foreign load, shmem_bind.c: none is injected here, so that other
# processes on the machine do not decide.)
got=$("$R" --topology ring -n 3 sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2' | sort -u)
[ "$got" = "$all" ] && ok "ring: a process that is no PE unbound ($got)" || bad "ring binding: '$got', wanted '$all'"
want=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0))
print(" ".join("%d:%d" % (k, c[k % len(c)]) for k in range(3)) + " ")')
out=$(NTBX_SPIN_TEST_FOREIGN=0 "$R" --topology ring -n 3 "$M" affinity)
got=$(echo "$out" | awk '{printf "%s:%s ", $1, $2}' | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/^ *//')
others=$(echo "$out" | awk '{for (i = 3; i <= NF; i++) print $i}' | sort -u)
nothers=$(echo "$out" | awk '{n += NF - 2} END {print n + 0}')
[ "$got" = "$want" ] && ok "ring: main threads bound round robin: $got" || bad "ring main threads: got '$got', wanted '$want'"
[ "$nothers" -ge 3 ] && [ "$others" = "$all" ] && ok "ring: $nothers other threads keep every CPU ($others)" ||
	bad "ring other threads: $nothers, CPUs '$others', wanted '$all'"
got=$("$R" --topology ring --bind-to none -n 2 "$M" affinity | awk '{print $2}' | sort -u)
[ "$got" = "$all" ] && ok "ring --bind-to none: main threads unbound" || bad "ring --bind-to none: '$got'"
# A relay's progress thread, once it has relayed, keeps off the CPU of the
# PE it relays for (shmem_ring.c, relay_keep_off): PE 0 (bound to the
# first CPU) puts two hops away through PE 1, whose thread for PE 0 then
# has every CPU but that one; its thread for PE 2 has every CPU, or every
# one but PE 2's if it relayed something of PE 2's (the barriers may).
# With one CPU nothing changes.  (PE 2 must keep its pin to CPU 2 mod n:
# no foreign load is injected, as above.)
out=$(NTBX_SPIN_TEST_FOREIGN=0 "$R" --topology ring -n 5 "$M" relay | awk '$1 == 1')
if python3 - "$out" <<'PY'
import os, sys
c = sorted(os.sched_getaffinity(0))
def fmt(s):
    out, i = [], 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append("%d" % s[i] if i == j else "%d-%d" % (s[i], s[j]))
        i = j + 1
    return ",".join(out)
def off(cpu):
    r = [x for x in c if x != cpu]
    return fmt(r if r else c)
got = sorted(w.split("=", 1)[1] for w in sys.argv[1].split()[1:])
want0, want2 = off(c[0]), (fmt(c), off(c[2 % len(c)]))
ok = len(got) == 2 and any(got[k] == want0 and got[1 - k] in want2 for k in (0, 1))
print("     PE 1's progress threads: %s (for PE 0: %s; for PE 2: %s)"
      % (" ".join(got), want0, " or ".join(want2)))
sys.exit(0 if ok else 1)
PY
then ok "ring: a relay keeps off the CPU of the PE it relays for"
else bad "ring relay threads: '$out'"
fi
got=$("$R" --topology ring --bind-to none -n 5 "$M" relay | awk '$1 == 1 {for (i = 2; i <= NF; i++) print $i}' | sort -u)
[ "$got" = "ntbx-shprog=$all" ] && ok "ring --bind-to none: relays keep every CPU" ||
	bad "ring --bind-to none relays: '$got', wanted 'ntbx-shprog=$all'"

# SIGTERM to oshrun reaches the PEs; everything is cleaned up.
"$R" -n 3 "$M" sleep "$work/ready" >"$work/out" 2>&1 &
bgpid=$!
for _ in $(seq 1 1500); do [ -e "$work/ready" ] && break; sleep 0.02; done
if [ -e "$work/ready" ]; then
	kill -TERM "$bgpid"; wait "$bgpid"; rc=$?; bgpid=
	[ $rc -eq 143 ] && ok "SIGTERM forwarded (exit 143)" || bad "SIGTERM: exit $rc"
else
	bad "sleep PEs never became ready"
fi
if pgrep -f "$work/misuse" >/dev/null; then bad "stray PE processes"; else ok "no stray PEs"; fi

# SIGKILL to oshrun: its private fabric stays until someone looks: the next
# `ntbx fabric list` (or oshrun) finds its owner lock free and removes it.
"$R" -n 2 "$M" sleep "$work/ready2" >"$work/out" 2>&1 &
bgpid=$!
for _ in $(seq 1 1500); do [ -e "$work/ready2" ] && break; sleep 0.02; done
if [ -e "$work/ready2" ]; then
	ls -d "$NTBX_SHM_DIR"/ntbx-oshrun-* >/dev/null 2>&1 &&
		ok "oshrun's private fabric exists while it runs" ||
		bad "no private fabric while oshrun runs"
	kill -KILL "$bgpid"; wait "$bgpid" 2>/dev/null; bgpid=
	pkill -KILL -f "$work/misuse" 2>/dev/null
	"$BIN/ntbx" fabric list >/dev/null
	if ls -d "$NTBX_SHM_DIR"/ntbx-oshrun-* >/dev/null 2>&1; then
		bad "a killed oshrun's fabric is still there after ntbx fabric list"
	else
		ok "a killed oshrun's fabric is reaped by ntbx fabric list"
	fi
else
	bad "sleep PEs never became ready (SIGKILL case)"
fi

# A program run alone is one PE.
"$BIN/oshcc" -O1 -I"$here" -o "$work/coll" "$here/coll.c" &&
	"$work/coll" >"$work/out" 2>&1 && grep -q "PASS coll (1 PEs)" "$work/out" &&
	ok "one PE without oshrun" || bad "one PE without oshrun"

# C++
if "$BIN/oshc++" -O1 -Wall -Wextra -Werror -o "$work/cxx" "$here/misc/cxx.cc" 2>"$work/err" &&
	"$R" -n 2 "$work/cxx" >"$work/out" 2>&1 && grep -q "PASS cxx" "$work/out"; then
	ok "C++ through oshc++"
else
	bad "C++ through oshc++"
fi

# C99: the deprecated shmem_wait/shmem_wait_until are functions, not only
# C11 macros.
if "$BIN/oshcc" -std=c99 -O1 -Wall -Wextra -Werror -o "$work/c99" "$here/misc/c99.c" 2>"$work/err" &&
	"$R" -n 2 "$work/c99" >"$work/out" 2>&1 && grep -q "PASS c99" "$work/out"; then
	ok "C99: shmem_wait, shmem_wait_until"
else
	bad "C99: shmem_wait, shmem_wait_until"
fi

# The profiling interface (pshmem_*): a wrapper sees the call, the data arrives.
if "$BIN/oshcc" -O1 -Wall -Wextra -Werror -o "$work/profile" "$here/misc/profile.c" 2>"$work/err" &&
	"$R" -n 2 "$work/profile" >"$work/out" 2>&1 && grep -q "PASS profile" "$work/out"; then
	ok "profiling interface"
else
	bad "profiling interface"
fi

left=$(ls -A "$NTBX_SHM_DIR")
[ -z "$left" ] && ok "fabric directory empty" || bad "left in the fabric directory: $left"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
