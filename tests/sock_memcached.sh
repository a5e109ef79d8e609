#!/usr/bin/env bash
# tests/sock_memcached.sh — memcached -t 4 under `ntbx run` with a
# multi-threaded client (4 threads x 2 connections, each thread its own poll
# loop: tests/sock/mc.py), with the default spinning and with
# NTBX_SPIN_US=0 (every wait a sleep: a lost wake-up shows as a request of
# about 1 s, the sleep cap).  Every reply is checked, no request may take
# 500 ms, and all 8 connections must close on the fabric.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_memcached

command -v memcached >/dev/null || { echo "skip: no memcached (scripts/deps.d/sock.txt)"; exit 0; }

NT=4 NC=2 ROUNDS=300 LIMIT=500
for spin in default 0; do
	if [ $spin = 0 ]; then export NTBX_SPIN_US=0; else unset NTBX_SPIN_US; fi
	P=$(free_port)
	bg memcached -t 4 -u root -l 127.0.0.1 -p "$P" -U 0 -c 256 2>"$WORK/mc-$spin.err" &
	MP=$!
	PIDS+=($MP)
	wait_port "$P" || bad "spin $spin: memcached did not listen"
	st=0
	run "$PY" "$HERE/sock/mc.py" "$P" $NT $NC $ROUNDS $LIMIT \
		>"$WORK/cli-$spin.out" 2>"$WORK/cli-$spin.err" || st=$?
	fab=$(grep -c 'path fabric' "$WORK/cli-$spin.err" || true)
	if [ "$st" -eq 0 ] && grep -q "^ok mc" "$WORK/cli-$spin.out" &&
	   [ "$fab" -eq $((NT * NC)) ]; then
		ok "NTBX_SPIN_US=$spin: $(sed -n 's/^ok mc //p' "$WORK/cli-$spin.out"), $fab connections on the fabric"
	else
		bad "NTBX_SPIN_US=$spin: status $st, $fab of $((NT * NC)) on the fabric: $(head -n3 "$WORK/cli-$spin.out"; grep -v 'comes up' "$WORK/cli-$spin.err" | tail -3)"
	fi
	kill "$MP" 2>/dev/null || true
	wait "$MP" 2>/dev/null || true
done

echo "sock_memcached: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
