#!/usr/bin/env bash
# tests/sock_ssh.sh — OpenSSH under `ntbx run`, both ends: sshd as its
# users run it (root, privilege separation: a forked child per connection
# that re-execs sshd, whose pre-auth child chroots and becomes sshd), with
# a temporary host key and a temporary user key; the client logs in and
# runs a command whose output (3 MB through md5sum, and a line) must come
# back exact; the connection must close on the fabric at the client, and
# nobody may say "stay on kernel TCP".  Afterwards the fabric directory
# holds what the fabric was made with (no wake FIFO left).
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_ssh

SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null ||
	{ echo "skip: no OpenSSH (scripts/deps.d/sock.txt)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "skip: sshd needs root"; exit 0; }
id sshd >/dev/null 2>&1 || { echo "skip: no sshd privilege-separation user"; exit 0; }

chmod 711 "$WORK"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/userkey"
cp "$WORK/userkey.pub" "$WORK/authorized_keys"
chmod 600 "$WORK/authorized_keys"
mkdir -p /run/sshd   # the privilege-separation chroot
P=$(free_port)
cat >"$WORK/sshd_config" <<CONF
Port $P
ListenAddress 127.0.0.1
HostKey $WORK/hostkey
PidFile $WORK/sshd.pid
AuthorizedKeysFile $WORK/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
SetEnv NTBX_SHM_DIR=$NTBX_SHM_DIR
CONF
"$SSHD" -t -f "$WORK/sshd_config" || { bad "sshd -t refused the configuration"; exit 1; }
bg "$SSHD" -D -e -f "$WORK/sshd_config" 2>"$WORK/sshd.err" &
PIDS+=($!)
wait_port "$P" || { tail "$WORK/sshd.err"; bad "sshd did not listen"; exit 1; }

want="$(head -c 3000000 /dev/zero | md5sum)"
st=0
run ssh -p "$P" -i "$WORK/userkey" -o StrictHostKeyChecking=no \
	-o UserKnownHostsFile=/dev/null -o BatchMode=yes root@127.0.0.1 \
	'echo hello-over-ssh; head -c 3000000 /dev/zero | md5sum' \
	>"$WORK/out" 2>"$WORK/cli.err" || st=$?
why=$(grep -h "stay on kernel TCP" "$WORK/sshd.err" "$WORK/cli.err" | head -n2 || true)
if [ "$st" -eq 0 ] && [ "$(sed -n 1p "$WORK/out")" = hello-over-ssh ] &&
   [ "$(sed -n 2p "$WORK/out")" = "$want" ] &&
   grep -q "listener 127.0.0.1:$P registered" "$WORK/sshd.err" &&
   grep -q "path fabric" "$WORK/cli.err" && [ -z "$why" ]; then
	ok "ssh login ran a command: its output exact, on the fabric ($(grep -o 'path fabric, [0-9]* bytes out, [0-9]* bytes in' "$WORK/cli.err" | head -n1))"
else
	[ -n "${SOCK_SSH_KEEP:-}" ] && cp "$WORK/sshd.err" "$WORK/cli.err" "$SOCK_SSH_KEEP/"
	bad "ssh: status $st, output '$(head -c 200 "$WORK/out")': $why $(grep -v Warning "$WORK/cli.err" | tail -n3; tail -n3 "$WORK/sshd.err")"
fi

# sshd's connection child has exited; stop the listener: nothing of the
# processes may be left in the fabric directory (wake FIFOs included).
# sshd kills its privilege-separation children, which cannot remove their
# FIFOs; the next process that joins the node removes those of dead
# holders (a listener that comes and goes, here).
kill "${PIDS[-1]}"
gone "${PIDS[-1]}" || bad "sshd did not stop"
P2=$(free_port)
run "$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', $P2)); s.listen(1)" \
	2>"$WORK/sweep.err" || bad "a listener to sweep the node: $(tail -n2 "$WORK/sweep.err")"
left=$(ls "$NTBX_SHM_DIR/ntbx-default" | grep -Ev '^(fabric|node-[0-9]+\.(live|mem|regs)|sock-v[0-9]+\.tab)$' || true)
if [ -z "$left" ]; then
	ok "fabric directory as made: $(ls "$NTBX_SHM_DIR/ntbx-default" | tr '\n' ' ')"
else
	bad "left in the fabric directory: $left"
fi

echo "sock_ssh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
