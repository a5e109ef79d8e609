#!/usr/bin/env bash
# tests/sock_signal.sh — signals and blocking calls on fabric sockets, as on
# kernel sockets: SA_RESTART resumes a blocking recv, a handler without it
# makes recv fail with EINTR, and so does SA_RESTART with SO_RCVTIMEO set,
# while a fault handler (SIGSEGV) without SA_RESTART changes nothing
# (tests/sock/restart.c, built here; each case first on kernel TCP, so a
# wrong expectation fails by itself, then under ntbx run).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_signal

cc -O1 -pthread -o "$WORK/restart" "$HERE/sock/restart.c" || { bad "cannot build restart.c"; exit 1; }
for mode in restart eintr timeout crashhandler; do
	if timeout 60 "$WORK/restart" "$mode" "$(free_port)" >"$WORK/k.out" 2>&1; then
		ok "kernel TCP: $(cat "$WORK/k.out")"
	else
		bad "kernel TCP $mode: $(cat "$WORK/k.out")"
	fi
	if NTBX_LOG=debug timeout 60 "$NTBX" run -- "$WORK/restart" "$mode" "$(free_port)" \
		>"$WORK/f.out" 2>"$WORK/f.err" &&
	   grep -q "accepted .* on the fabric" "$WORK/f.err"; then
		ok "fabric: $(cat "$WORK/f.out")"
	else
		bad "fabric $mode: $(cat "$WORK/f.out"; grep -v 'comes up' "$WORK/f.err" | tail -3)"
	fi
done

echo "sock_signal: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
