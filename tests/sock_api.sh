#!/usr/bin/env bash
# tests/sock_api.sh — socket calls beyond read and write on connections
# that go over the fabric (libntbx-preload.so under `ntbx run`): sendmmsg
# and recvmmsg, splice between a pipe and a socket, SO_RCVTIMEO,
# SO_SNDTIMEO, SO_LINGER, send after the peer's close, shutdown or reset
# (EPIPE and ECONNRESET exactly when the kernel gives them), SIOCOUTQ, vfork
# (Python's subprocess), epoll with EPOLLEXCLUSIVE, across fork and with a
# kernel descriptor beside a busy fabric socket, IPv6
# and v4-mapped addresses, asyncio.
# tests/sock/api.py holds the cases; each also passes on kernel TCP (the
# script checks that too, so a case cannot encode a wrong expectation), and
# the call-by-call results a case prints ("seq ...") must be the same on
# both.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_api

# CASE MIN_FABRIC_CLOSES (vfork: its children exit holding the socket, so
# no close is the last; the case asks `ntbx stat` instead; cork: the
# acceptor's socket is shared with programs that run without the preload)
for spec in mmsg:2 splice:2 timeo:2 linger:6 epipe:32 outq:2 vfork:0 epollex:2 \
            epollfork:2 epollmix:2 cork:1 ipv6:6 asyncio:40; do
	c=${spec%%:*} want=${spec##*:}
	if ! NTBX_SOCK=off timeout 120 "$PY" "$HERE/sock/api.py" "$c" "$(free_port)" \
		>"$WORK/$c.tcp" 2>&1; then
		bad "$c on kernel TCP (the expectation is wrong): $(tail -3 "$WORK/$c.tcp")"
		continue
	fi
	if NTBX_STAT="$NTBX" run "$PY" "$HERE/sock/api.py" "$c" "$(free_port)" >"$WORK/$c.out" 2>"$WORK/$c.err" &&
	   n=$(grep -c "path fabric" "$WORK/$c.err" || true) && [ "$n" -ge "$want" ] &&
	   diff <(grep "^seq " "$WORK/$c.tcp") <(grep "^seq " "$WORK/$c.out") >"$WORK/$c.diff"; then
		ok "$(grep "^ok" "$WORK/$c.out" | cut -c4-) ($n fabric closes)"
	else
		bad "$c: $(cat "$WORK/$c.diff" 2>/dev/null; tail -3 "$WORK/$c.out"; grep -v "^ntbx\[.*info" "$WORK/$c.err" | tail -8)"
	fi
done

echo "sock_api: $pass passed, $fail failed"
leaks=$(ls "$NTBX_SHM_DIR" 2>/dev/null | grep -v '^ntbx-default$' || true)
[ -z "$leaks" ] || { echo "FAIL stray files in $NTBX_SHM_DIR: $leaks"; fail=$((fail+1)); }
[ "$fail" -eq 0 ]
