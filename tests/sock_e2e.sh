#!/usr/bin/env bash
# tests/sock_e2e.sh — unmodified programs under `ntbx run` (libntbx-preload.so):
# Python sockets (one-process connect/write/accept, echo, large transfer,
# half-close, selectors), an interposed client against a plain server and
# the reverse (bytes unchanged, over TCP), iperf3 (bytes on both ends),
# redis-server with redis-cli and redis-benchmark, a bad variable.  Each
# fabric connection is checked to have gone over the fabric (NTBX_LOG=info
# prints the path and byte counts of each connection when it closes).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_e2e
pre_bytes() { grep -o '[0-9]* sent by TCP before' "$1" | awk '{s+=$1} END {printf "%.0f\n", s}'; }

# 1. one process: connect, write before accept, echo, selectors, half-close
if run "$PY" "$HERE/sock/echo.py" selftest "$(free_port)" >"$WORK/self.out" 2>"$WORK/self.err" &&
   grep -q "ok selftest" "$WORK/self.out" && grep -q "path fabric" "$WORK/self.err"; then
	ok "python one-process connect/write/accept, selectors, half-close on the fabric"
else
	bad "python selftest: $(cat "$WORK/self.out" "$WORK/self.err" | tail -5)"
fi

# 2. echo server and client, both interposed, 20 MB + small
P=$(free_port)
bg "$PY" "$HERE/sock/echo.py" server "$P" "$WORK/ready1" 2>"$WORK/srv1.err" &
PIDS+=($!)
wait_file "$WORK/ready1" || bad "echo server did not start"
for size in 1 65536 20000000; do
	# bytes written before the acceptor answered go by TCP (counted apart)
	if run "$PY" "$HERE/sock/echo.py" client "$P" "$size" >"$WORK/c.out" 2>"$WORK/c.err" &&
	   grep -q "^ok $size" "$WORK/c.out" && [ "$(fabric_bytes "$WORK/c.err")" -eq "$size" ] &&
	   { [ "$size" -lt 1000000 ] || [ "$(pre_bytes "$WORK/c.err")" -lt $((size / 2)) ]; }; then
		ok "python echo $size bytes, both ends interposed, on the fabric ($(pre_bytes "$WORK/c.err") by TCP first)"
	else
		bad "python echo $size: $(cat "$WORK/c.out" "$WORK/c.err" | tail -3)"
	fi
done

# 3. interposed client, plain server (same echo server, not interposed)
P2=$(free_port)
"$PY" "$HERE/sock/echo.py" server "$P2" "$WORK/ready2" &
PIDS+=($!)
wait_file "$WORK/ready2" || bad "plain echo server did not start"
if run "$PY" "$HERE/sock/echo.py" client "$P2" 3000000 >"$WORK/c2.out" 2>"$WORK/c2.err" &&
   grep -q "^ok 3000000" "$WORK/c2.out" && ! grep -q "path fabric" "$WORK/c2.err"; then
	ok "interposed client, plain server: bytes unchanged, over TCP"
else
	bad "interposed client vs plain server: $(tail -3 "$WORK/c2.out" "$WORK/c2.err")"
fi
# 4. plain client, interposed server
if "$PY" "$HERE/sock/echo.py" client "$P" 3000000 >"$WORK/c3.out" 2>&1 &&
   grep -q "^ok 3000000" "$WORK/c3.out"; then
	ok "plain client, interposed server: bytes unchanged, over TCP"
else
	bad "plain client vs interposed server: $(tail -3 "$WORK/c3.out")"
fi

# 5. iperf3, both ends interposed: bytes checked on both ends
P=$(free_port)
bg iperf3 -s -1 -p "$P" -J >"$WORK/ips.json" 2>"$WORK/ips.err" &
IP=$!
PIDS+=($IP)
wait_port "$P" || bad "iperf3 server did not listen"
N=$((1 << 30))
run iperf3 -c 127.0.0.1 -p "$P" -n "$N" -l 128K -J >"$WORK/ipc.json" 2>"$WORK/ipc.err" || true
wait "$IP" || true
if "$PY" "$HERE/sock/iperf_check.py" "$WORK/ipc.json" "$WORK/ips.json" \
	"$WORK/ipc.err" "$WORK/ips.err" "$N"
then ok "iperf3 -n 1G -l 128K: what the client sent is what the server read from the fabric"
else bad "iperf3: $(tail -n3 "$WORK/ipc.err" "$WORK/ips.err")"; fi

# 6. redis: SET then GET of random values, and redis-benchmark
P=$(free_port)
bg redis-server --port "$P" --bind 127.0.0.1 --save "" --appendonly no \
	--daemonize no --dir "$WORK" >"$WORK/redis.out" 2>&1 &
RP=$!
PIDS+=($RP)
wait_port "$P" || bad "redis-server did not listen"
V=$(head -c 3000 /dev/urandom | base64 -w0)
run redis-cli -p "$P" SET ntbxkey "$V" >"$WORK/set.out" 2>"$WORK/set.err" || true
run redis-cli -p "$P" GET ntbxkey >"$WORK/get.out" 2>"$WORK/get.err" || true
if [ "$(cat "$WORK/get.out")" = "$V" ] && grep -q OK "$WORK/set.out"; then
	ok "redis-cli SET/GET of a 4 KB value round trip"
else
	bad "redis SET/GET: $(head -c 200 "$WORK/get.out"; tail -2 "$WORK/get.err")"
fi
if run redis-benchmark -p "$P" -n 2000 -c 10 -t set,get -q >"$WORK/rb.out" 2>"$WORK/rb.err" &&
   grep -q "GET" "$WORK/rb.out" && grep -q "path fabric" "$WORK/rb.err"; then
	ok "redis-benchmark SET/GET, 10 clients, on the fabric: $(tr '\r' '\n' <"$WORK/rb.out" | grep -a 'requests per second' | tr '\n' ' ')"
else
	bad "redis-benchmark: $(tail -3 "$WORK/rb.out" "$WORK/rb.err")"
fi
run redis-cli -p "$P" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$RP" 2>/dev/null || true

# 7. a bad variable: one line on stderr, the program works (over TCP)
NTBX_SOCK_BUF=lots NTBX_LOG=warn timeout 60 "$NTBX" run -- "$PY" "$HERE/sock/echo.py" \
	selftest "$(free_port)" >"$WORK/bv.out" 2>"$WORK/bv.err" || true
if grep -q "ok selftest" "$WORK/bv.out" && [ "$(grep -c NTBX_SOCK_BUF "$WORK/bv.err")" -eq 1 ]; then
	ok "NTBX_SOCK_BUF=lots: one stderr line, the program still works"
else
	bad "bad NTBX_SOCK_BUF: $(cat "$WORK/bv.out" "$WORK/bv.err" | tail -3)"
fi

# 8. ntbx stat while a fabric connection is open
P=$(free_port)
bg "$PY" "$HERE/sock/echo.py" server "$P" "$WORK/ready3" 2>/dev/null &
PIDS+=($!)
wait_file "$WORK/ready3" || true
run "$PY" -c "
import socket, subprocess, sys
c = socket.create_connection(('127.0.0.1', $P)); c.sendall(b'x' * 5000)
got = b''
while len(got) < 5000: got += c.recv(65536)
print(subprocess.run(['$NTBX', 'stat'], capture_output=True, text=True).stdout)
c.close()" >"$WORK/stat.out" 2>/dev/null || true
if grep -q "conn .*127.0.0.1:$P .*fabric" "$WORK/stat.out"; then
	ok "ntbx stat lists the live connection on the fabric"
else
	bad "ntbx stat: $(cat "$WORK/stat.out")"
fi

# 9. exec: a child that inherits an accepted fabric socket uses it
if run "$PY" "$HERE/sock/exec_child.py" "$(free_port)" >"$WORK/ex.out" 2>"$WORK/ex.err" &&
   grep -q "parent got b'from-exec'" "$WORK/ex.out" && grep -q "child got b'hello'" "$WORK/ex.out" &&
   grep -q "eof: True" "$WORK/ex.out" && grep -q "path fabric" "$WORK/ex.err"; then
	ok "fork + exec: the child inherits the socket, both ways work, end of stream after both close"
else
	bad "exec child: $(cat "$WORK/ex.out" "$WORK/ex.err" | tail -4)"
fi

echo "sock_e2e: $pass passed, $fail failed"
leaks=$(ls "$NTBX_SHM_DIR" 2>/dev/null | grep -v '^ntbx-default$' || true)
[ -z "$leaks" ] || { echo "FAIL stray files in $NTBX_SHM_DIR: $leaks"; fail=$((fail+1)); }
[ "$fail" -eq 0 ]
