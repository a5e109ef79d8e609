#!/usr/bin/env bash
# The shared libraries export exactly their declared surface (issue 15):
#   libntbx-preload.so  the libc functions listed in src/sock/interposed.def
#   libntbx.so          the API declared in include/ntbx/*.h
#   libntbx-shmem.so    the API declared in shmem.h, pshmem.h and shmemx.h
# nm -D of each is compared with the names the compiler finds in those
# files; any extra export (an internal a program could collide with) or
# missing one (a declared function nobody can link) fails, by name.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$NTBX_TEST_BIN/.." && pwd)
lib=$build/lib
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

exports() { nm -D --defined-only "$1" | awk '{print $3}' | sed 's/@.*//' | sort -u; }

compare() {   # name, library, file of declared names
	local name=$1 so=$2 want=$3
	if [ ! -f "$so" ]; then
		echo "FAIL: $name: $so is not built" >&2
		fail=1
		return
	fi
	exports "$so" >"$tmp/$name.got"
	sort -u "$want" >"$tmp/$name.want"
	local extra missing
	extra=$(comm -23 "$tmp/$name.got" "$tmp/$name.want")
	missing=$(comm -13 "$tmp/$name.got" "$tmp/$name.want")
	if [ -n "$extra" ]; then
		echo "FAIL: $name exports what it does not declare:" $extra >&2
		fail=1
	fi
	if [ -n "$missing" ]; then
		echo "FAIL: $name does not export what it declares:" $missing >&2
		fail=1
	fi
	[ -z "$extra$missing" ] &&
		echo "ok: $name exports its $(wc -l <"$tmp/$name.want") declared names"
	return 0
}

# The preload: what the X-macro list names, through the preprocessor.
"$cc" -E -P -x c -D'SK_CALL(r,n,p)=n' -D'SK_REAL(r,n,p)=' \
	"$src/src/sock/interposed.def" | tr -s ' \n' '\n\n' | grep -v '^$' \
	>"$tmp/preload.names"
compare libntbx-preload "$lib/libntbx-preload.so" "$tmp/preload.names"
# No version node: a program's read@GLIBC_2.2.5 must bind to the wrapper.
if readelf -V "$lib/libntbx-preload.so" | grep -q "Version definition"; then
	echo "FAIL: libntbx-preload.so defines a symbol version" >&2
	fail=1
fi

python3 "$src/scripts/api_names.py" --cc "$cc" -I "$src/include" \
	"$src"/include/ntbx/*.h >"$tmp/ntbx.names"
compare libntbx "$lib/libntbx.so" "$tmp/ntbx.names"

inc=$build/include
python3 "$src/scripts/api_names.py" --cc "$cc" -I "$inc" \
	"$inc/shmem.h" "$inc/pshmem.h" "$inc/shmemx.h" |
	grep -vx ntbx_shmem_no_typed_routine_for_this_argument_type \
	>"$tmp/shmem.names"
compare libntbx-shmem "$lib/libntbx-shmem.so" "$tmp/shmem.names"

[ "$fail" = 0 ]
