#!/usr/bin/env bash
# tests/sock_sigpipe.sh — no SIGPIPE from ntbx's own pipes.  A client
# sleeping in poll() on a fabric socket has a wake-up FIFO that the server
# writes to when it rings it; the client is killed while it sleeps there,
# and the server, which keeps SIGPIPE's default action and writes with
# MSG_NOSIGNAL, must survive its next writes (status 0, not 141) and see
# the error kernel TCP gives (tests/sock/peerexit.py).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_sigpipe

# PID sleeps in poll() with the 1 s slice of a fabric wait (its queue pair
# armed, its FIFO in the set); bounded, like wait_port.  (x86_64: poll is
# system call 7, its timeout the third argument.)
in_poll() {
	local nr a b t
	for _ in $(seq 400); do
		read -r nr a b t _ <"/proc/$1/syscall" 2>/dev/null || return 1
		[ "$nr" = 7 ] && [ "$t" = 0x3e8 ] && return 0
		sleep 0.05
	done
	return 1
}
wait_line() { # FILE LINE: until FILE holds LINE (bounded)
	for _ in $(seq 400); do grep -qx "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

P=$(free_port)
mkfifo "$WORK/ctl"
bg "$PY" "$HERE/sock/peerexit.py" server "$P" "$WORK/ready" <"$WORK/ctl" \
	>"$WORK/s.out" 2>"$WORK/s.err" &
S=$!
PIDS+=($S)
exec 3>"$WORK/ctl"
wait_file "$WORK/ready" || bad "server did not start"
bg "$PY" "$HERE/sock/peerexit.py" client "$P" >"$WORK/c.out" 2>"$WORK/c.err" &
C=$!
PIDS+=($C)
wait_line "$WORK/s.out" accepted || bad "server did not accept"
# one wake-up through the FIFO while the client lives: the server opens it
in_poll "$C" || bad "client not asleep in poll: $(cat /proc/$C/syscall 2>&1)"
echo reply >&3
wait_line "$WORK/c.out" "got 1" || bad "client not woken: $(cat "$WORK/c.out")"
in_poll "$C" || bad "client not asleep again: $(cat /proc/$C/syscall 2>&1)"
kill -9 "$C"
wait "$C" 2>/dev/null || true
echo write >&3
exec 3>&-
st=0
wait "$S" || st=$?
if [ "$st" -eq 0 ] && grep -q "^ok server survived" "$WORK/s.out"; then
	ok "writer survived its peer's death ($(sed -n "s/^ok server survived: //p" "$WORK/s.out"))"
else
	bad "writer exit status $st: $(cat "$WORK/s.out"; tail -3 "$WORK/s.err")"
fi
grep -q "path fabric" "$WORK/s.err" && ok "the connection was on the fabric" ||
	bad "server path: $(grep -v 'comes up' "$WORK/s.err" | tail -3)"

echo "sock_sigpipe: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
