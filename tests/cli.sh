#!/usr/bin/env bash
# tests/cli.sh — the ntbx command: fabric management round trip, command-line
# errors (exit 2, one stderr line), runtime errors (exit 1, message names the
# fabric), and the benchmarks' JSON (well-formed, required keys, positive
# numbers; speed is never asserted here).
set -euo pipefail

. "$(dirname "$0")/lib/local.sh" cli
. "$(dirname "$0")/lib/cli_lib.sh"

one_line_err() { # NAME
	local n
	n=$(printf '%s' "$err" | grep -c '' || true)
	if [ "$n" -eq 1 ] && [[ "$err" == ntbx:* ]]; then ok "$1: one stderr line"
	else bad "$1: stderr has $n lines: $err"; fi
}


# ------------------------------------------------------------ help
run "$NTBX" --help;                 expect_rc "ntbx --help" 0
for c in fabric perf pingpong qp; do
	run "$NTBX" $c --help;          expect_rc "ntbx $c --help" 0
	contains "ntbx $c --help" "$out" "usage: ntbx $c"
done

# ------------------------------------------- fabric round trip
run "$NTBX" fabric create clia --nodes 3 --topology ring --memory 24M --window 32M
expect_rc "fabric create ring" 0
contains "create" "$out" "clia"
run "$NTBX" fabric create clic --nodes 2 --topology ring --memory 24M --window 32M
expect_rc "fabric create ring of 2" 0
run "$NTBX" fabric show clic
expect_rc "fabric show ring of 2" 0
for s in "node 0" "node 1" ring "port 0"; do
	contains "show ring of 2" "$out" "$s"
done
run "$NTBX" fabric destroy clic;           expect_rc "fabric destroy ring of 2" 0
run "$NTBX" fabric create clib --nodes 2 --json
expect_rc "fabric create --json" 0
json_lines "fabric create" "fabric nodes topology" "nodes" 1

run "$NTBX" fabric list
expect_rc "fabric list" 0
contains "list" "$out" "clia"
contains "list" "$out" "ring"
contains "list" "$out" "clib"
contains "list" "$out" "switch"
run "$NTBX" fabric list --json
json_lines "fabric list" "fabric nodes topology alive window memory" "nodes" 2

run "$NTBX" fabric show clia
expect_rc "fabric show" 0
for s in "node 0" "node 1" "node 2" ring "port 1" doorbell spad; do
	contains "show" "$out" "$s"
done
run "$NTBX" fabric show clia --json
expect_rc "fabric show --json" 0
json_lines "fabric show" "fabric" "" 4
NTBX_FABRIC=clib run "$NTBX" fabric show
expect_rc "fabric show via NTBX_FABRIC" 0
contains "show (NTBX_FABRIC)" "$out" "clib"

run "$NTBX" fabric create clia --nodes 2
expect_rc "fabric create existing" 1
one_line_err "create existing"

run "$NTBX" fabric destroy clia;           expect_rc "fabric destroy" 0
run "$NTBX" fabric destroy --fabric clib --json
expect_rc "fabric destroy --fabric --json" 0
json_lines "fabric destroy" "fabric" "" 1
left=$(ls -A "$NTBX_SHM_DIR")
if [ -z "$left" ]; then ok "destroy leaves nothing in NTBX_SHM_DIR"
else bad "left in NTBX_SHM_DIR: $left"; fi

# ---------------------------------------------- bad command lines
while IFS= read -r line; do
	[ -n "$line" ] || continue
	# shellcheck disable=SC2086
	run "$NTBX" $line
	expect_rc "usage: ntbx $line" 2
	one_line_err "usage: ntbx $line"
done <<'EOF_BAD'
bogus
--bogus
fabric
fabric frob
fabric create x --nodes abc
fabric create x --nodes 1
fabric create x --nodes 65
fabric create x --nodes
fabric create x --topology mesh
fabric create x --nodes 1 --topology ring
fabric create x --window 12QB
fabric create x --memory -4M
fabric create x --frobnicate
fabric create bad/name
fabric create x y
fabric list extra
perf --sizes 12QB
perf --sizes 4M-1K
perf --threads 9
perf --threads abc
perf --mode gpu
perf --seconds
perf --seconds -1
perf --what
pingpong --mode carrier
pingpong --iters 0
pingpong --sizes ,
qp --nodes 1
qp --nodes abc
qp --nodes 9
qp --topology ring --nodes 2
qp --topology star
qp --hops 3 --nodes 4 --topology ring
qp --ring-size 12345
qp --threads 0
EOF_BAD

run "$NTBX"
expect_rc "usage: ntbx (no command)" 2
one_line_err "usage: ntbx (no command)"

# ------------------------------------------------- runtime errors
for c in "fabric show" "fabric destroy" "perf --fabric" "pingpong --fabric" "qp --fabric"; do
	# shellcheck disable=SC2086
	run "$NTBX" $c missingfab
	expect_rc "$c missing fabric" 1
	one_line_err "$c missing fabric"
	contains "$c missing fabric" "$err" "missingfab"
done
NTBX_FABRIC=envfab run "$NTBX" fabric show
expect_rc "fabric show missing NTBX_FABRIC fabric" 1
contains "missing NTBX_FABRIC fabric" "$err" "envfab"
run "$NTBX" fabric show
expect_rc "fabric show missing default fabric" 1
contains "missing default fabric" "$err" "default"

# ----------------------------------------------------- benchmarks
run "$NTBX" perf --sizes 64,4K --seconds 0.02 --reps 1 --json
expect_rc "perf cpu" 0
json_lines "perf cpu" "size mode threads mbps memcpy_mbps ratio" \
	"size threads mbps memcpy_mbps ratio" 2
run "$NTBX" perf --sizes 64K --mode dma --threads 1,2 --seconds 0.02 --reps 1 --json
expect_rc "perf dma threads" 0
json_lines "perf dma" "size mode threads mbps memcpy_mbps ratio" \
	"size threads mbps memcpy_mbps ratio" 2
run "$NTBX" perf --sizes 1K --seconds 0.02 --reps 1
expect_rc "perf table" 0
contains "perf table" "$out" "memcpy_mbps"

run "$NTBX" pingpong --sizes 8,64 --iters 200 --json
expect_rc "pingpong" 0
json_lines "pingpong" "size mode oneway_ns_p50 oneway_ns_p99 raw_oneway_ns_p50" \
	"size oneway_ns_p50 oneway_ns_p99 raw_oneway_ns_p50" 4
run "$NTBX" pingpong --sizes 64 --mode poll --iters 100
expect_rc "pingpong poll table" 0
contains "pingpong table" "$out" "raw_oneway_ns_p50"

QPKEYS="size hops threads mbps oneway_ns_p50 memcpy_mbps"
run "$NTBX" qp --sizes 64,64K --seconds 0.05 --reps 1 --iters 50 --json
expect_rc "qp switch" 0
json_lines "qp switch" "$QPKEYS" "$QPKEYS" 2
run "$NTBX" qp --sizes 256K --push --seconds 0.05 --reps 1 --iters 20 --json
expect_rc "qp push" 0
json_lines "qp push" "$QPKEYS" "$QPKEYS" 1
run "$NTBX" qp --nodes 4 --topology ring --threads 1,2 --sizes 4K \
	--seconds 0.05 --reps 1 --iters 20 --json
expect_rc "qp ring" 0
json_lines "qp ring" "$QPKEYS" "$QPKEYS" 4
if python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert sorted({r["hops"] for r in rows}) == [1, 2], rows
assert sorted({r["threads"] for r in rows}) == [1, 2], rows
' <"$WORK/out" 2>"$WORK/pyerr"; then ok "qp ring covers hops 1,2 and threads 1,2"
else bad "qp ring rows: $(tail -1 "$WORK/pyerr")"; fi

# A benchmark on an existing fabric, and nothing left behind by any.
run "$NTBX" fabric create benchfab --nodes 2 --memory 32M --window 32M
run "$NTBX" perf --fabric benchfab --sizes 4K --seconds 0.02 --reps 1 --json
expect_rc "perf --fabric" 0
json_lines "perf --fabric" "size mbps" "mbps" 1
run "$NTBX" fabric destroy benchfab
left=$(ls -A "$NTBX_SHM_DIR")
if [ -z "$left" ]; then ok "benchmarks leave nothing in NTBX_SHM_DIR"
else bad "left in NTBX_SHM_DIR: $left"; fi

# Ctrl-C: the temporary fabric and every process go away.
set +m
"$NTBX" perf --seconds 5 >/dev/null 2>"$WORK/int.err" &
pid=$!
for _ in $(seq 100); do
	[ -n "$(ls -A "$NTBX_SHM_DIR")" ] && break
	sleep 0.05
done
sleep 0.5
kill -INT "$pid"
set +e; wait "$pid"; rc=$?; set -e
left=$(ls -A "$NTBX_SHM_DIR")
if [ "$rc" -eq 130 ] && [ -z "$left" ]; then ok "SIGINT cleans up (exit 130)"
else bad "SIGINT: exit $rc, left: $left"; fi
if pgrep -P "$pid" >/dev/null 2>&1 || pgrep -f "$NTBX perf --seconds 5" >/dev/null 2>&1
then bad "SIGINT: processes left"; else ok "SIGINT: no processes left"; fi

# ntbx run and a fabric of an older layout: the implicit default fabric is
# made again; a named one is left alone, with one line saying why sockets
# stay on TCP.  (The layout version is the word after the 8-byte magic.)
# Not in the sanitizer build: an ASan-built preload library cannot be
# loaded into programs built without ASan.
if [ "${NTBX_SANITIZED:-0}" != 1 ]; then
old_layout() { printf '\001\000\000\000' | dd of="$NTBX_SHM_DIR/ntbx-$1/fabric" bs=1 seek=8 conv=notrunc status=none; }
"$NTBX" fabric create default --nodes 2 >/dev/null
"$NTBX" fabric create olderfab --nodes 2 >/dev/null
old_layout default
old_layout olderfab
run "$NTBX" run -- true
expect_rc "ntbx run, default fabric of an older layout" 0
contains "ntbx run remakes an old default fabric" "$err" "making it again"
run "$NTBX" fabric list --json
layout=$(sed -n 's/^#define SHM_LAYOUT_VERSION \([0-9]*\).*/\1/p' "$(dirname "$0")/../src/dev/shm/layout.h")
contains "the default fabric has the current layout again" "$out" "\"layout\": $layout"
run "$NTBX" run --fabric olderfab -- true
expect_rc "ntbx run, named fabric of an older layout" 0
contains "ntbx run says a named old fabric keeps sockets on TCP" "$err" "stay on kernel TCP"
contains "... and names the fix" "$err" "ntbx fabric destroy olderfab"
"$NTBX" fabric destroy default >/dev/null
"$NTBX" fabric destroy olderfab >/dev/null
fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
