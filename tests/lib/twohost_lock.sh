# tests/lib/twohost_lock.sh — source it in a test that brings up
# ../shared/twohost.sh hosts, after its skip checks: the hosts are
# machine-wide state, so the script runs again under the lock every such
# test takes (NTBX_TWOHOST_LOCK, /tmp/ntbx-test.lock), unless its caller
# already holds it and says so (NTBX_TWOHOST_LOCKED=1).  flock -o: the
# hosts' holder processes do not inherit the lock, so hosts left up by a
# killed run never keep it.
if [ -z "${NTBX_TWOHOST_LOCKED:-}" ]; then
	export NTBX_TWOHOST_LOCKED=1
	exec flock -o "${NTBX_TWOHOST_LOCK:-/tmp/ntbx-test.lock}" bash "$0" "$@"
fi
