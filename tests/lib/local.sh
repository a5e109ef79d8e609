# tests/lib/local.sh — what a test of fabrics on this one host does first
# (the one-host analogue of hosts.sh).  Source it from a test script:
#
#   . "$(dirname "$0")/lib/local.sh" NAME
#       BIN (NTBX_TEST_BIN, else build/bin of this checkout) and NTBX, the
#       ntbx binary (the test fails at once when it is not built);
#       NTBX_SHM_DIR, a private fabric directory under /dev/shm, and WORK, a
#       private work directory, so tests run in parallel and leave nothing;
#       no NTBX_FABRIC or NTBX_NODE from the caller's environment;
#       at exit (local_cleanup, the EXIT trap): local_at_exit first, if the
#       test or its family's library defines it (processes to stop), then
#       both directories removed.  A test that sets a trap of its own calls
#       local_cleanup from it.
LOCAL_TEST=$1
BIN=${NTBX_TEST_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin}
NTBX="$BIN/ntbx"
[ -x "$NTBX" ] || { echo "$LOCAL_TEST: no $NTBX (build first)" >&2; exit 1; }
NTBX_SHM_DIR=$(mktemp -d "/dev/shm/ntbx-$LOCAL_TEST.XXXXXX")
export NTBX_SHM_DIR
unset NTBX_FABRIC NTBX_NODE
WORK=$(mktemp -d)
local_cleanup() {
	if declare -F local_at_exit >/dev/null; then local_at_exit || true; fi
	rm -rf "$NTBX_SHM_DIR" "$WORK"
}
trap local_cleanup EXIT
