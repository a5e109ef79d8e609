#!/usr/bin/env bash
# The OpenSHMEM ring's ways to a PE that is not a neighbour (shmem_ring.c),
# with tests/shmem/relay.c (puts, gets, atomics to 1, 2 and 3 hops away,
# every byte checked): on 5 PEs with the relay (two hops through the node
# in between), with the relay off (forwarded queue pairs), with every wait
# sleeping at once (NTBX_SPIN_US=0: a lost wake-up hangs, the oshrun
# timeout fails it), with one transfer thread and with 4, and on 7 PEs,
# where 3 hops go forwarded and 2 relayed at once.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${NTBX_TEST_BIN:?set NTBX_TEST_BIN to the build bin directory}
work=$(mktemp -d /tmp/ntbx-shmem-relay.XXXXXX)
export NTBX_SHM_DIR
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-test-relay-XXXXXX)
trap 'rm -rf "$work" "$NTBX_SHM_DIR"' EXIT
export SHMEM_SYMMETRIC_SIZE=32M
"$BIN/oshcc" -O1 -g -Wall -Wextra -Werror -I"$here/shmem" -o "$work/relay" \
	"$here/shmem/relay.c" || exit 1
pass=0 fail=0
run() {   # NAME ENV... -- OSHRUN-ARGS...
	local name=$1; shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	if env "${envs[@]}" "$BIN/oshrun" --timeout 120 --topology ring "$@" \
		"$work/relay" >"$work/out" 2>&1 && grep -q '^PASS' "$work/out"; then
		echo "ok   $name"; pass=$((pass + 1))
	else
		echo "FAIL $name"; tail -20 "$work/out"; fail=$((fail + 1))
	fi
}
run "5 PEs, relay" NTBX_SHMEM_RELAY=1 -- --threads 2 -n 5
run "5 PEs, relay off" NTBX_SHMEM_RELAY=0 -- --threads 2 -n 5
run "5 PEs, relay, NTBX_SPIN_US=0" NTBX_SPIN_US=0 -- --threads 1 -n 5
run "5 PEs, relay off, NTBX_SPIN_US=0" NTBX_SPIN_US=0 NTBX_SHMEM_RELAY=0 -- --threads 4 -n 5
if [ -z "${NTBX_SANITIZED:-}" ]; then
	run "7 PEs, relay and forwarded" NTBX_SHMEM_RELAY=1 -- --threads 2 -n 7
	run "7 PEs, NTBX_SPIN_US=0" NTBX_SPIN_US=0 -- --threads 2 -n 7
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
