# tests/lib/twohost_lock.sh — source it in a test or bench script that
# brings up ../shared/twohost.sh hosts, after its skip checks: the hosts are
# machine-wide state, so the script runs again under the lock every such
# script takes (NTBX_TWOHOST_LOCK, /tmp/ntbx-test.lock), unless its caller
# already holds it: a caller that says so (NTBX_TWOHOST_LOCKED=1), or one of
# this process's ancestors holding the lock (`flock /tmp/ntbx-test.lock
# bench/ofi.sh` by hand, a bench run inside a locked test run), which would
# otherwise wait for itself for ever.  flock -o: the hosts' holder processes
# do not inherit the lock, so hosts left up by a killed run never keep it.

# twohost_lock_ours FILE: 0 if a flock(2) lock on FILE is held by this
# process or an ancestor (/proc/locks names the process that took it).
twohost_lock_ours() {
	local ino holders p
	ino=$(stat -c %i "$1" 2>/dev/null) || return 1
	holders=" $(awk -v ino="$ino" '$2 == "FLOCK" {
		n = split($6, a, ":"); if (a[n] == ino) printf "%s ", $5 }' \
		/proc/locks 2>/dev/null)"
	p=$$
	while [ -n "$p" ] && [ "$p" -gt 1 ]; do
		[[ "$holders" == *" $p "* ]] && return 0
		p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
	done
	return 1
}

if [ -z "${NTBX_TWOHOST_LOCKED:-}" ]; then
	export NTBX_TWOHOST_LOCKED=1
	twohost_lock_ours "${NTBX_TWOHOST_LOCK:-/tmp/ntbx-test.lock}" ||
		exec flock -o "${NTBX_TWOHOST_LOCK:-/tmp/ntbx-test.lock}" bash "$0" "$@"
fi
