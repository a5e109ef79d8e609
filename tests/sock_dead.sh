#!/usr/bin/env bash
# tests/sock_dead.sh — processes that die without closing (issue 11 item
# 3, issue 12 items 5 and 7): a zombie reader, the killed child of a
# forking server, waves of clients that _exit(); node memory must not grow
# wave after wave, and after every process ends the fabric directory
# holds exactly what `ntbx fabric create` made.  tests/sock/dead.py.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_dead

"$NTBX" fabric create default --nodes 2 >/dev/null
FAB="$NTBX_SHM_DIR/ntbx-default"
made=$(cd "$FAB" && ls | sort)
allocs() { "$NTBX" fabric show default | awk '/^node 0:/{n=1} n && /allocation/{print $(NF-1); exit}'; }

for m in zombie forked; do
	if out=$(run "$PY" "$HERE/sock/dead.py" $m "$NTBX" 2>"$WORK/$m.err"); then
		ok "${out#ok }"
	else
		bad "$m: $out $(grep -v 'comes up' "$WORK/$m.err" | tail -3)"
	fi
done

# Waves: the script answers each "wave" line once it counted allocations.
mkfifo "$WORK/in"
run "$PY" "$HERE/sock/dead.py" waves "$NTBX" 50 4 <"$WORK/in" >"$WORK/waves.out" 2>"$WORK/waves.err" &
W=$!
PIDS+=($W)
exec 3>"$WORK/in"
counts=()
for w in 0 1 2 3; do
	for _ in $(seq 600); do grep -q "^wave $w" "$WORK/waves.out" && break; sleep 0.05; done
	counts+=("$(allocs)")
	echo >&3
done
exec 3>&-
st=0; wait "$W" || st=$?
if [ "$st" -eq 0 ] && grep -q "^ok waves" "$WORK/waves.out"; then
	ok "$(sed -n 's/^ok //p' "$WORK/waves.out")"
else
	bad "waves: status $st: $(cat "$WORK/waves.out"; grep -v 'comes up' "$WORK/waves.err" | tail -3)"
fi
# Connections closed by the server with dead clients are reclaimed at
# once: the count after the last wave is no higher than after the first.
if [ "${#counts[@]}" -eq 4 ] && [ "${counts[3]}" -le "${counts[0]}" ]; then
	ok "node memory does not grow: allocations after each wave ${counts[*]}"
else
	bad "node memory grows: allocations after each wave ${counts[*]}"
fi

now=$(cd "$FAB" && ls | sort)
[ "$now" = "$made" ] && ok "the fabric directory holds what create made" ||
	bad "fabric directory: made [$made] now [$now]"

echo "sock_dead: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
