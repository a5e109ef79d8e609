# tests/sock/lib.sh — what the socket test scripts share.  Source it as
#   . "$(dirname "$0")/sock/lib.sh" NAME
# It finds ntbx and the real python3, makes a private fabric directory and
# work directory (tests/lib/local.sh; removed at exit after every process in
# PIDS and their children), and defines the helpers below.
#
# Under the sanitizer build (NTBX_SANITIZED=1) the programs run with the
# ASan-built preload: `ntbx run` of that build puts the ASan runtime first in
# LD_PRELOAD.  Memory errors and undefined behaviour in the library still
# abort the program; leak checking is off, since the leaks of the programs
# we interpose (python3, nginx, ...) at exit are not ours (the C tests check
# the library's own).

if [ "${NTBX_SANITIZED:-0}" = 1 ]; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
SOCK_TEST=$1
. "$(dirname "${BASH_SOURCE[0]}")/../lib/local.sh" "$SOCK_TEST"
HERE=$(cd "$(dirname "$0")" && pwd)
[ -e "$BIN/../lib/libntbx-preload.so" ] || { echo "$SOCK_TEST: no libntbx-preload.so" >&2; exit 1; }
# The real interpreter (a pyenv-style shim would add processes).
PY=$(command -v /usr/bin/python3 || command -v python3)

unset NTBX_SOCK NTBX_SOCK_PORTS NTBX_SOCK_BUF
PIDS=()
local_at_exit() {
	for p in "${PIDS[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

free_port() { # below the ephemeral range, so no connect() takes it meanwhile
	"$PY" -c '
import random, socket
while True:
    p = random.randint(20000, 32000)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass'
}
wait_port() { # PORT: until something listens there (bounded; no connection)
	for _ in $(seq 300); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}
wait_file() { for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }
gone() { # PID: wait (bounded) until it exits; 1 if it still runs
	for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
	return 1
}
fabric_bytes() { # LOGFILE: total "bytes out" of connections that closed on the fabric
	grep -o 'path fabric, [0-9]* bytes out' "$1" | awk '{s+=$3} END {printf "%.0f\n", s}'
}
run() { NTBX_LOG=info timeout 120 "$NTBX" run -- "$@"; }
skip() { echo "SKIP $SOCK_TEST: $*"; exit 77; }
# asan_hangs PROGRAM: under the sanitizer build, whether PROGRAM cannot run
# with the ASan runtime preloaded (`PROGRAM --version` does not end within
# 5 s: curl and postgres deadlock between the runtime's start-up and glibc's
# locale lock, a limitation of ASan under LD_PRELOAD, not of ntbx).
asan_hangs() {
	[ "${NTBX_SANITIZED:-0}" = 1 ] || return 1
	local rt st=0
	rt=$(readlink -f "$(cc -print-file-name=libasan.so)")
	timeout 5 env LD_PRELOAD="$rt" "$1" --version </dev/null >/dev/null 2>&1 || st=$?
	[ "$st" = 124 ]
}
# http_get URL FILE: fetch URL into FILE under `ntbx run` with curl, or
# with Python's urllib where curl cannot run (asan_hangs); HTTP_CLIENT names
# the one used.
HTTP_CLIENT=
http_get() {
	if [ -z "$HTTP_CLIENT" ]; then
		HTTP_CLIENT=curl
		if ! command -v curl >/dev/null || asan_hangs curl; then HTTP_CLIENT=python3; fi
	fi
	if [ "$HTTP_CLIENT" = curl ]; then
		run curl -s -o "$2" "$1"
	else
		run "$PY" -c 'import sys, urllib.request
open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1], timeout=60).read())' "$1" "$2"
	fi
}
# Background peers: `ntbx run` execs, so $! is the program itself.
bg() { NTBX_LOG=info exec "$NTBX" run -- "$@"; }
