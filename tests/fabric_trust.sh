#!/usr/bin/env bash
# A second user against root's fabrics (DESIGN.md, trust boundaries): a
# fabric name another user took first, a symlink planted where a fabric
# file or directory is expected, another user's real fabric.  Root's ntbx
# must refuse each with a clear error and change nothing it points to.
# Needs root (it creates the user); skipped otherwise.
set -eu
BIN=${NTBX_TEST_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
NTBX="$BIN/ntbx"
. "$(dirname "$0")/lib/cli_lib.sh"
# An ASan-built preload cannot load into plain programs: no `ntbx run` there.
PRELOAD=1
[ "${NTBX_SANITIZED:-0}" = 1 ] && PRELOAD=0

if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null ||
   ! command -v setpriv >/dev/null; then
	echo "fabric_trust: skipped (needs root, useradd and setpriv)"
	echo "fabric_trust: 0 passed, 0 failed"
	exit 0
fi
OTHER=ntbx-trust-test
id -u "$OTHER" >/dev/null 2>&1 ||
	useradd --system --no-create-home --shell /usr/sbin/nologin "$OTHER" ||
	{ echo "fabric_trust: cannot create user $OTHER"; exit 1; }
ROOT=$(mktemp -d /dev/shm/ntbx-trust.XXXXXX)
WORK=$(mktemp -d)
chmod 1777 "$ROOT"          # like /dev/shm: everyone may create, sticky
export NTBX_SHM_DIR=$ROOT
SECRET=$(mktemp /root/ntbx-trust-secret.XXXXXX)
trap 'rm -rf "$ROOT" "$SECRET" "$WORK"' EXIT
echo "root only" >"$SECRET"
chmod 600 "$SECRET"
as_other() { setpriv --reuid="$OTHER" --regid="$OTHER" --clear-groups \
	env NTBX_SHM_DIR="$ROOT" "$@"; }

# 1. The default fabric's name, taken first by another user, with a symlink
#    where the socket table goes, pointing at a root-only file.
as_other mkdir -m 700 "$ROOT/ntbx-default" 2>/dev/null ||
	as_other mkdir "$ROOT/ntbx-default"
as_other chmod 755 "$ROOT/ntbx-default"
as_other ln -s "$SECRET" "$ROOT/ntbx-default/sock-v5.tab"
run "$NTBX" fabric create default --nodes 2
expect_rc "create over a name another user took" 1
contains "... says it exists" "$err" "already exists"
run "$NTBX" fabric show default
expect_rc "show another user's directory" 1
contains "... says whose it is" "$err" "belongs to uid"
if [ $PRELOAD = 1 ]; then
	run "$NTBX" run -- true
	expect_rc "ntbx run on a squatted default fabric runs the program" 0
	contains "... says sockets stay on kernel TCP" "$err" "stay on kernel TCP"
	contains "... and why" "$err" "another user's fabric"
fi
same "the root-only file behind the symlink is unchanged" "$(cat "$SECRET")" "root only"
same "... and still root's" "$(stat -c %U "$SECRET")" root
as_other rm -rf "$ROOT/ntbx-default"

# 2. A symlink as the fabric directory itself.
mkdir -m 700 "$ROOT/root-private"
as_other ln -s "$ROOT/root-private" "$ROOT/ntbx-linked"
run "$NTBX" fabric show linked
expect_rc "a symlinked fabric directory" 1
contains "... is refused" "$err" "symlink"
run "$NTBX" fabric destroy linked
expect_rc "destroying it" 1
same "the directory it points to is left alone" "$(ls -A "$ROOT/root-private" | wc -l)" 0
same "... and exists" "$([ -d "$ROOT/root-private" ] && echo yes)" yes

# 3. Another user's real fabric: not joined, not destroyed by mistake.
as_other "$NTBX" fabric create theirs --nodes 2 >/dev/null
same "the other user made a fabric" "$(stat -c %U "$ROOT/ntbx-theirs")" "$OTHER"
run "$NTBX" perf --fabric theirs --sizes 4K
expect_rc "joining another user's fabric" 1
contains "... is refused, naming the owner" "$err" "belongs to uid"
if [ $PRELOAD = 1 ]; then
	run "$NTBX" run --fabric theirs -- true
	contains "ntbx run on it keeps TCP and says why" "$err" "another user's fabric"
fi

# 4. A fabric file of the wrong size (truncated registers): refused before
#    it is mapped, no SIGBUS.
"$NTBX" fabric create mine --nodes 2 >/dev/null
truncate -s 100 "$ROOT/ntbx-mine/node-0.regs"
run "$NTBX" perf --fabric mine --sizes 4K
expect_rc "a truncated register file" 1
contains "... is refused before mapping" "$err" "shorter than its layout"
"$NTBX" fabric destroy mine >/dev/null

# 5. The default name is per user.
if [ $PRELOAD = 1 ]; then
	same "another user's default fabric has its own name" \
		"$(as_other "$NTBX" run -- sh -c 'echo $NTBX_FABRIC' 2>/dev/null)" \
		"default-$(id -u "$OTHER")"
	as_other "$NTBX" fabric destroy "default-$(id -u "$OTHER")" \
		>/dev/null 2>&1 || true
fi
as_other "$NTBX" fabric destroy theirs >/dev/null 2>&1 || true

# 6. A group fabric: modes set explicitly (whatever the umask), and the
#    group's other member uses it: its FIFOs and tables get the group too;
#    sockets cross the two users.
G=ntbx-trust-grp
getent group "$G" >/dev/null || groupadd --system "$G"
usermod -a -G "$G" "$OTHER"
AS_GROUP=(setpriv --reuid="$OTHER" --regid="$OTHER" --groups="$G"
          env NTBX_SHM_DIR="$ROOT")
(umask 077; "$NTBX" fabric create grp --nodes 2 --group "$G" >/dev/null)
same "group fabric directory mode" "$(stat -c %a "$ROOT/ntbx-grp")" 770
same "... its files'" "$(stat -c %a "$ROOT/ntbx-grp/node-0.mem")" 660
same "... their group" "$(stat -c %G "$ROOT/ntbx-grp/node-1.regs")" "$G"
run "${AS_GROUP[@]}" "$NTBX" pingpong --fabric grp --sizes 8
expect_rc "the group's other member uses the fabric" 0
if [ $PRELOAD = 1 ]; then
	PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	echo "hello from root" >"$WORK/index.html"
	chmod 755 "$WORK"; chmod 644 "$WORK/index.html"
	NTBX_LOG=info "$NTBX" run --fabric grp --node 0 -- python3 -m http.server \
		--bind 127.0.0.1 --directory "$WORK" "$PORT" >"$WORK/srv.log" 2>&1 &
	SRV=$!
	# until the server's listener is registered on the fabric (bounded:
	# 30 s; a loaded machine under make test -j took more than 5)
	for _ in $(seq 600); do
		grep -q "listener 127.0.0.1:$PORT registered" "$WORK/srv.log" 2>/dev/null && break
		sleep 0.05
	done
	run "${AS_GROUP[@]}" NTBX_LOG=info "$NTBX" run --fabric grp --node 1 -- \
		curl -s "http://127.0.0.1:$PORT/index.html"
	same "a client of the group fetches root's page" "$out" "hello from root"
	contains "... over the fabric" "$err" "path fabric"
	kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null || true
	others=$(find "$ROOT/ntbx-grp" -perm /007 | wc -l)
	same "nothing in the group fabric is open to other users" "$others" 0
	wrong=$(find "$ROOT/ntbx-grp" ! -group "$G" | wc -l)
	same "everything in it has the fabric's group" "$wrong" 0
fi
"$NTBX" fabric destroy grp >/dev/null

finish fabric_trust
