#!/usr/bin/env bash
# Writes the settings table of README.md ("## Settings") from the one table,
# src/util/settings.def, as `ntbx settings --markdown` prints it; with
# --check, only says whether README.md has it (tests/settings.sh).
#   scripts/readme_settings.sh [--check]     (NTBX=path/to/ntbx; default
#                                             build/bin/ntbx)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ntbx=${NTBX:-$root/build/bin/ntbx}
[ -x "$ntbx" ] || { echo "readme_settings: no $ntbx (build first: make)" >&2; exit 1; }
table=$("$ntbx" settings --markdown)
python3 - "$root/README.md" "${1:-}" "$table" <<'PY'
import sys
path, mode, table = sys.argv[1], sys.argv[2], sys.argv[3]
begin = "<!-- settings table: scripts/readme_settings.sh writes it from src/util/settings.def -->"
end = "<!-- end of settings table -->"
text = open(path).read()
if text.count(begin) != 1 or text.count(end) != 1:
    sys.exit("README.md: the settings table's markers are missing or doubled")
head, rest = text.split(begin)
old, tail = rest.split(end)
new = "\n" + table.rstrip("\n") + "\n"
if mode == "--check":
    if old != new:
        import difflib
        sys.stderr.writelines(difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), "README.md",
            "ntbx settings --markdown"))
        sys.exit("README.md's settings table differs from the table in "
                 "src/util/settings.def: run scripts/readme_settings.sh")
    sys.exit(0)
open(path, "w").write(head + begin + new + end + tail)
PY
