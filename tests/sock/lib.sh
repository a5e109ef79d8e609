# tests/sock/lib.sh — what the socket test scripts share.  Source it as
#   . "$(dirname "$0")/sock/lib.sh" NAME
# It skips under the sanitizer build, finds ntbx and the real python3, makes
# a private fabric directory and work directory (removed at exit with every
# process in PIDS and their children), and defines the helpers below.

if [ "${NTBX_SANITIZED:-0}" = 1 ]; then
	echo "skip: an ASan-built preload library cannot be loaded into" \
	     "programs built without ASan (the C tests cover the logic here)"
	exit 0
fi
SOCK_TEST=$1
BIN=${NTBX_TEST_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
NTBX="$BIN/ntbx"
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$NTBX" ] || { echo "$SOCK_TEST: no $NTBX (build first)" >&2; exit 1; }
[ -e "$BIN/../lib/libntbx-preload.so" ] || { echo "$SOCK_TEST: no libntbx-preload.so" >&2; exit 1; }
# The real interpreter (a pyenv-style shim would add processes).
PY=$(command -v /usr/bin/python3 || command -v python3)

NTBX_SHM_DIR=$(mktemp -d "/dev/shm/ntbx-$SOCK_TEST.XXXXXX")
export NTBX_SHM_DIR
unset NTBX_FABRIC NTBX_NODE NTBX_SOCK NTBX_SOCK_PORTS NTBX_SOCK_BUF
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$NTBX_SHM_DIR" "$WORK"
}
trap cleanup EXIT

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
# Background peers: `ntbx run` execs, so $! is the program itself.
bg() { NTBX_LOG=info exec "$NTBX" run -- "$@"; }
