#!/usr/bin/env bash
# bench/ssh_login.sh — seconds per ssh login that runs a command with 3 MB
# of output (`head -c 3000000 /dev/zero`), sshd and ssh both under
# `ntbx run`, against the same over kernel TCP (both without the preload),
# alternating, ROUNDS rounds of N logins each.  Needs root and OpenSSH
# (tests/sock_ssh.sh sets up the same server).  Run under the timing lock:
#   flock /tmp/ntbx-bench.lock bash bench/ssh_login.sh [N] [ROUNDS]
# NTBX_TEST_BIN=DIR/build/bin measures another build.
set -euo pipefail
N=${1:-5} ROUNDS=${2:-3}
. "$(dirname "$0")/../tests/sock/lib.sh" ssh_login
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "ssh_login: needs root and sshd" >&2; exit 1; }

chmod 711 "$WORK"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/userkey"
cp "$WORK/userkey.pub" "$WORK/authorized_keys"
chmod 600 "$WORK/authorized_keys"
mkdir -p /run/sshd
conf() { # PORT: a configuration listening there
	cat <<CONF
Port $1
ListenAddress 127.0.0.1
HostKey $WORK/hostkey
AuthorizedKeysFile $WORK/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
SetEnv NTBX_SHM_DIR=$NTBX_SHM_DIR
CONF
}
PT=$(free_port); conf "$PT" >"$WORK/tcp.conf"
PF=$(free_port); conf "$PF" >"$WORK/fab.conf"
/usr/sbin/sshd -D -e -f "$WORK/tcp.conf" 2>"$WORK/tcp.err" &
PIDS+=($!)
NTBX_LOG=warn "$NTBX" run -- /usr/sbin/sshd -D -e -f "$WORK/fab.conf" 2>"$WORK/fab.err" &
PIDS+=($!)
wait_port "$PT" && wait_port "$PF" || { tail "$WORK"/*.err; exit 1; }

logins() { # PORT PREFIX...: seconds for N logins
	local p=$1; shift
	local t0 t1
	t0=$(date +%s.%N)
	for _ in $(seq "$N"); do
		"$@" ssh -p "$p" -i "$WORK/userkey" -o StrictHostKeyChecking=no \
			-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=error \
			root@127.0.0.1 "head -c ${BYTES:-3000000} /dev/zero" | wc -c | grep -qx "${BYTES:-3000000}" ||
			{ echo "ssh_login: a login on port $p lost bytes" >&2; exit 1; }
	done
	t1=$(date +%s.%N)
	echo "$t0 $t1 $N" | awk '{printf "%.3f", ($2 - $1) / $3}'
}
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	tcp=$(logins "$PT")
	fab=$(logins "$PF" env NTBX_LOG=warn "$NTBX" run --)
	echo "round $r: kernel TCP $tcp s/login, fabric $fab s/login"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
