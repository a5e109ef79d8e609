# Helpers of the command-line tests (tests/cli.sh, tests/fabric_trust.sh,
# tests/dma_tools.sh):
# run a command capturing its status and output, and count checks.
# The caller sets $WORK (a private directory) first (tests/lib/local.sh).

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# run CMD...: sets $rc, $out (stdout), $err (stderr); never aborts.
run() {
	set +e
	timeout 300 "$@" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	set -e
	out=$(cat "$WORK/out")
	err=$(cat "$WORK/err")
}

expect_rc() { # NAME WANT
	if [ "$rc" -eq "$2" ]; then ok "$1 (exit $rc)"
	else bad "$1: exit $rc, wanted $2; stderr: $err"; fi
}

contains() { # NAME HAYSTACK NEEDLE
	if [[ "$2" == *"$3"* ]]; then ok "$1 mentions '$3'"
	else bad "$1 does not mention '$3': $2"; fi
}

same() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then ok "$1"
	else bad "$1: got '$2', wanted '$3'"; fi
}

# json_lines NAME KEYS NUMKEYS MINLINES: every line of $WORK/out is a
# JSON object with KEYS, numbers in NUMKEYS > 0, at least MINLINES lines.
json_lines() {
	if python3 -c '
import json, sys
keys = sys.argv[1].split(); nums = sys.argv[2].split(); minl = int(sys.argv[3])
lines = [l for l in sys.stdin.read().splitlines()]
if len(lines) < minl:
    sys.exit("only %d lines" % len(lines))
for l in lines:
    o = json.loads(l)
    if not isinstance(o, dict):
        sys.exit("not an object: " + l)
    for k in keys:
        if k not in o:
            sys.exit("missing %s in %s" % (k, l))
    for k in nums:
        v = o[k]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            sys.exit("%s is not a positive number in %s" % (k, l))
' "$2" "$3" "$4" <"$WORK/out" 2>"$WORK/pyerr"; then
		ok "$1 JSON ($(wc -l <"$WORK/out") lines)"
	else
		bad "$1 JSON: $(tail -1 "$WORK/pyerr")"
	fi
}

finish() { # TEST-NAME: the closing line, and the status
	echo "$1: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
