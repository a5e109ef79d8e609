#!/usr/bin/env bash
# tests/settings.sh — the settings table seen from outside: README.md's table
# is the one `ntbx settings --markdown` prints (made from
# src/util/settings.def); the config files reach real processes (a fabric
# made where ~/.config/ntbx.conf's shm_dir says, per-program lines, the
# environment winning, $HOME/.config when XDG_CONFIG_HOME is unset); a bad
# value is one stderr line and the command still works; help texts point at
# `ntbx settings`.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${NTBX_TEST_BIN:-$HERE/../build/bin}
NTBX="$BIN/ntbx"
[ -x "$NTBX" ] || { echo "settings: no $NTBX (build first)" >&2; exit 1; }

WORK=$(mktemp -d)
SHM=$(mktemp -d /dev/shm/ntbx-settings-test.XXXXXX)
cleanup() { rm -rf "$WORK" "$SHM"; }
trap cleanup EXIT
unset NTBX_SHM_DIR NTBX_FABRIC NTBX_NODE NTBX_SPIN_US NTBX_LOG NTBX_SOCK_BUF
export XDG_CONFIG_HOME="$WORK/cfg"
mkdir -p "$XDG_CONFIG_HOME"

. "$HERE/lib/cli_lib.sh"

# ------------------------------------------------------------ README
if NTBX="$NTBX" "$HERE/../scripts/readme_settings.sh" --check 2>"$WORK/diff"; then
	ok "README.md's settings table is the generated one"
else
	bad "README.md's settings table differs: $(head -c 2000 "$WORK/diff")"
fi
n_table=$("$NTBX" settings --markdown | grep -c '^| `')
n_def=$(grep -c '^NTBX_SETTING(' "$HERE/../src/util/settings.def")
n_internal=$("$NTBX" settings --all --json | grep -c '' )
[ "$n_internal" -eq "$n_def" ] && [ "$n_table" -lt "$n_def" ] &&
	ok "ntbx settings --all lists all $n_def rows, the README the $n_table for users" ||
	bad "rows: table $n_table, --all $n_internal, settings.def $n_def"

# ------------------------------------------------------- config file
value() { # NAME [env...] -> "value source" from ntbx settings --json
	local name=$1; shift
	env "$@" "$NTBX" settings --json | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["name"] == sys.argv[1]:
        print(o["value"], o["source"])' "$name"
}
cat >"$XDG_CONFIG_HOME/ntbx.conf" <<EOF
# a test's config
shm_dir = $SHM
spin_us=20
program=ntbx   sock_buf=1M
program=nginx  sock_buf=2M
EOF
chmod 600 "$XDG_CONFIG_HOME/ntbx.conf"
v=$(value NTBX_SPIN_US)
[ "$v" = "20 $XDG_CONFIG_HOME/ntbx.conf:3" ] && ok "a config value and its FILE:LINE" ||
	bad "spin_us from the config: '$v'"
v=$(value NTBX_SOCK_BUF)
[ "$v" = "1M $XDG_CONFIG_HOME/ntbx.conf:4" ] && ok "a program=ntbx line applies to ntbx, nginx's does not" ||
	bad "program lines: '$v'"
v=$(value NTBX_SPIN_US NTBX_SPIN_US=7)
[ "$v" = "7 environment" ] && ok "the environment wins over the file" || bad "env over file: '$v'"

# the file reaches the library: the fabric is made where shm_dir says
run "$NTBX" fabric create cfgfab --nodes 2
expect_rc "fabric create under the config's shm_dir" 0
[ -d "$SHM/ntbx-cfgfab" ] && ok "the fabric is in the config's shm_dir" ||
	bad "no $SHM/ntbx-cfgfab: $(ls -A "$SHM")"
run "$NTBX" fabric destroy cfgfab
expect_rc "fabric destroy" 0

# ~/.config when XDG_CONFIG_HOME is unset
mkdir -p "$WORK/home/.config"
printf 'spin_us=33\n' >"$WORK/home/.config/ntbx.conf"
v=$(value NTBX_SPIN_US -u XDG_CONFIG_HOME HOME="$WORK/home")
[ "$v" = "33 $WORK/home/.config/ntbx.conf:1" ] && ok "\$HOME/.config/ntbx.conf" ||
	bad "HOME's config: '$v'"

# a file others may write is refused with one line, and not used
chmod 666 "$XDG_CONFIG_HOME/ntbx.conf"
err=$("$NTBX" settings 2>&1 >/dev/null)
v=$(value NTBX_SPIN_US 2>/dev/null)
[ "$(printf '%s\n' "$err" | grep -c '')" -eq 1 ] &&
	[[ "$err" == *"writable by users other than its owner; ignored"* ]] &&
	[ "$v" = "None default" ] && ok "a world-writable config: one line, ignored" ||
	bad "world-writable config: '$err' value '$v'"
chmod 600 "$XDG_CONFIG_HOME/ntbx.conf"

# a bad line: FILE:LINE, skipped; the rest applies
printf 'spin_us=20\nspin_us=lots\nnosuch=1\n' >"$XDG_CONFIG_HOME/ntbx.conf"
err=$("$NTBX" settings 2>&1 >/dev/null)
v=$(value NTBX_SPIN_US 2>/dev/null)
[[ "$err" == *"ntbx.conf:2: spin_us='lots': expected a whole number"* ]] &&
	[[ "$err" == *"ntbx.conf:3: unknown key 'nosuch'"* ]] &&
	[ "$v" = "20 $XDG_CONFIG_HOME/ntbx.conf:1" ] && ok "bad lines named and skipped" ||
	bad "bad lines: '$err' value '$v'"
: >"$XDG_CONFIG_HOME/ntbx.conf"

# the preload reads it too: a per-program line keeps python3's connections
# on TCP, another program's line does not
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
preload_run() { # -> stderr of a self-test under ntbx run, NTBX_LOG=info
	NTBX_SHM_DIR=$SHM NTBX_LOG=info timeout 60 "$NTBX" run -- python3 \
		"$HERE/sock/echo.py" selftest "$PORT" 2>&1 >"$WORK/selftest.out" || true
}
printf 'program=python3* sock_ports=!1-65535\n' >"$XDG_CONFIG_HOME/ntbx.conf"
err=$(preload_run)
grep -q "ok selftest" "$WORK/selftest.out" && [[ "$err" == *"port $PORT left on TCP (NTBX_SOCK_PORTS)"* ]] &&
	[[ "$err" != *"path fabric"* ]] && ok "program=python3* sock_ports=... reaches the preload" ||
	bad "per-program ports in the preload: $err"
printf 'program=nginx sock_ports=!1-65535\n' >"$XDG_CONFIG_HOME/ntbx.conf"
err=$(preload_run)
grep -q "ok selftest" "$WORK/selftest.out" && [[ "$err" == *"path fabric"* ]] &&
	ok "another program's line leaves python3 on the fabric" ||
	bad "nginx's line applied to python3: $err"
: >"$XDG_CONFIG_HOME/ntbx.conf"

# ------------------------------------------------------ a bad variable
err=$(NTBX_LOG=loud "$NTBX" fabric list 2>&1 >/dev/null) && rc=0 || rc=$?
[ "$rc" -eq 0 ] && [ "$err" = "ntbx: ignoring NTBX_LOG='loud': expected error, warn, info or debug; using warn" ] &&
	ok "a bad NTBX_LOG: one line, the command works" || bad "bad NTBX_LOG: rc $rc '$err'"

# ---------------------------------------------------------- help texts
run "$NTBX" help settings
expect_rc "ntbx help settings" 0
[[ "$out" == *"SHMEM_SYMMETRIC_SIZE  (config: shmem_symmetric_size)"* ]] &&
	ok "ntbx help settings lists the table" || bad "help settings: $out"
run "$NTBX" --help
[[ "$out" == *"ntbx settings"* ]] && ok "ntbx --help points at ntbx settings" || bad "ntbx --help"
if [ -x "$BIN/oshrun" ]; then
	out=$("$BIN/oshrun" --help 2>&1 || true)
	[[ "$out" == *"SHMEM_SYMMETRIC_SIZE   default 512M"* ]] &&
		ok "oshrun --help lists OpenSHMEM's settings" || bad "oshrun --help: $out"
fi
finish settings
