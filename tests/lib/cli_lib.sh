# Helpers of the command-line tests (tests/cli.sh, tests/fabric_trust.sh):
# run a command capturing its status and output, and count checks.
# The caller sets $WORK (a private directory) first.

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

finish() { # TEST-NAME: the closing line, and the status
	echo "$1: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
