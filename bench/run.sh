#!/usr/bin/env bash
# bench/run.sh — run every bench/*.sh (except this one) in name order.
# Each writes its CSV under bench/out/ and prints its own summary; this
# exits non-zero if any of them failed.
set -uo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
failed=()
for b in "$DIR"/*.sh; do
	[ "$(basename "$b")" = run.sh ] && continue
	echo "### $(basename "$b")"
	if ! bash "$b"; then
		failed+=("$(basename "$b")")
	fi
done
if [ ${#failed[@]} -ne 0 ]; then
	echo "bench: failed: ${failed[*]}" >&2
	exit 1
fi
echo "bench: all done; results in $DIR/out/"
