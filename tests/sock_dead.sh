#!/usr/bin/env bash
# tests/sock_dead.sh — processes that die without closing (issue 11 item
# 3, issue 12 items 5 and 7): a zombie reader, a reader in a PID namespace
# (as root), the killed child of a forking server, waves of clients that
# _exit(); node memory must not grow
# wave after wave, and after every process ends the fabric directory
# holds exactly what `ntbx fabric create` made.  tests/sock/dead.py.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_dead

"$NTBX" fabric create default --nodes 2 >/dev/null
FAB="$NTBX_SHM_DIR/ntbx-default"
made=$(cd "$FAB" && ls | sort)
# (awk reads to the end: an early exit would kill `fabric show` with
# SIGPIPE, which pipefail and set -e turn into the script's silent end)
allocs() { "$NTBX" fabric show default | awk '/^node 0:/{n=1} n && !d && /allocation/{print $(NF-1); d=1}'; }

# Each case runs in a session of its own (its pid is its process group),
# bounded by timeout; whatever it forked is killed with its group after
# it, and by the trap if the script itself is interrupted.
GROUPS_=()
trap 'for g in "${GROUPS_[@]}"; do kill -KILL -- -$g 2>/dev/null || true; done; local_cleanup' EXIT
CASES="zombie forked nbeof"
[ "$(id -u)" = 0 ] && command -v unshare >/dev/null && CASES="zombie pidns forked nbeof"
for m in $CASES; do
	setsid env NTBX_LOG=info timeout 30 "$NTBX" run -- "$PY" "$HERE/sock/dead.py" $m "$NTBX" \
		>"$WORK/$m.out" 2>"$WORK/$m.err" &
	g=$!
	GROUPS_+=($g)
	st=0; wait "$g" || st=$?
	out=$(cat "$WORK/$m.out")
	if pgrep -g "$g" >/dev/null; then
		bad "$m: processes left: $(pgrep -g "$g" | tr '\n' ' ')"
		kill -KILL -- -"$g" 2>/dev/null || true
	fi
	if [ "$st" -eq 0 ]; then
		ok "${out#ok }"
	else
		bad "$m: status $st: $out $(grep -v 'comes up' "$WORK/$m.err" | tail -3)"
	fi
done

# Waves: the script prints "wave N" when every client of wave N has
# exited; we count allocations and answer with a line.  It runs in its own
# session (setsid: its process group is its pid), so that on any failure
# the trap kills every client it forked too, and under a 60 s timeout.
mkfifo "$WORK/in" "$WORK/out"
# Waves of 50 clients that exit without closing: 20 in the suite (1,000
# clients; each leaves a TIME_WAIT port behind for a minute, which the
# other tests need too), SOCK_DEAD_WAVES=100 for the issue's 5,000.
NW=${SOCK_DEAD_WAVES:-20}
setsid env NTBX_LOG=info timeout 240 "$NTBX" run -- "$PY" "$HERE/sock/dead.py" waves "$NTBX" 50 $NW \
	<"$WORK/in" >"$WORK/out" 2>"$WORK/waves.err" &
W=$!
PIDS+=($W)
GROUPS_+=($W)
exec 3>"$WORK/in" 4<"$WORK/out"
counts=() res=""
for ((w = 0; w < NW; w++)); do
	IFS= read -r -t 60 line <&4 || break
	[ "$line" = "wave $w" ] || { res=$line; break; }
	counts+=("$(allocs)")
	echo >&3
done
[ -n "$res" ] || IFS= read -r -t 60 res <&4 || true
exec 3>&- 4<&-
st=0; wait "$W" || st=$?
if [ "$st" -eq 0 ] && [ "${res#ok waves}" != "$res" ]; then
	ok "${res#ok }"
else
	bad "waves: status $st: $res $(grep -v 'comes up' "$WORK/waves.err" | tail -3)"
fi
# Nothing of it outlives it: its process group is empty.
if pgrep -g "$W" >/dev/null; then
	bad "waves: processes left: $(pgrep -g "$W" | tr '\n' ' ')"
	kill -KILL -- -"$W" 2>/dev/null || true
fi
# Connections whose clients died are reclaimed when the server closes
# them: the allocation count does not grow from one wave to the next.  It
# moves within the spare queue-pair halves a node may keep (QP_SPARES_MAX,
# 8; how many are kept when the count is taken depends on timing), and a
# wave may leave some connections to the next one's claims: a server that
# sees a client's end of stream before the kernel has dropped that
# client's lock (its descriptors close in no set order at exit) cannot
# free its memory, which the next claims reap.  So a count above that
# margin must come down within the next two waves; a leak of one half per
# wave passes the margin by the tenth wave and never comes down.
SPARES=8
grows=0 over=0
for ((k = 1; k < ${#counts[@]}; k++)); do
	if [ "${counts[k]}" -le $((counts[0] + SPARES)) ]; then over=0
	else over=$((over + 1)); [ "$over" -lt 3 ] || grows=1; fi
done
if [ "${#counts[@]}" -eq $NW ] && [ "$grows" -eq 0 ]; then
	ok "node memory does not grow: allocations after waves 1, 2, $NW: ${counts[0]} ${counts[1]} ${counts[NW-1]}"
else
	bad "node memory grows (or waves missing): allocations after each wave ${counts[*]}"
fi

# What create made, and the socket table, which stays (DESIGN: the
# listener registry and connection slots outlive their processes; a zero
# table is empty).  No FIFO of any dead process is left.
want=$(printf '%s\n' $made sock-v5.tab | sort)
now=$(cd "$FAB" && ls | sort)
[ "$now" = "$want" ] && ok "the fabric directory holds what create made and the socket table" ||
	bad "fabric directory: want [$(echo $want)] now [$(echo $now)]"

echo "sock_dead: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
