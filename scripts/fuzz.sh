#!/usr/bin/env bash
# make fuzz: run every fuzz target for FUZZ_SECONDS (default 300) each,
# built with AddressSanitizer and UBSan in build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-300}
cmake -S . -B build-fuzz -DNTBX_SANITIZE=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)"
status=0
for t in build-fuzz/bin/fuzz_*; do
	echo "== $t for ${secs}s"
	"$t" -seconds="$secs" || status=1
done
exit $status
