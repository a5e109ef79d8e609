#!/usr/bin/env bash
# make install's result works: headers, library and ntbx.pc build a program
# that links libntbx and runs against a real fabric; the binary is there,
# and the node agent where the binary finds it.
set -euo pipefail
build=$(cd "$NTBX_TEST_BIN/.." && pwd)
tmp=$(mktemp -d)
shm=$(mktemp -d /dev/shm/ntbx-install-test.XXXXXX)
trap 'rm -rf "$tmp" "$shm"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(dirname "$(find "$tmp/prefix" -name ntbx.pc)")
# ntbx.pc names the configured prefix; point pkg-config at this one.
export PKG_CONFIG_PATH=$pc
cflags="-I$tmp/prefix/include"
# Under make test-san the library is instrumented: so must the program be.
[ -n "${NTBX_SANITIZED:-}" ] && cflags="$cflags -fsanitize=address,undefined"
libdir=$(dirname "$(find "$tmp/prefix" -name 'libntbx.so' | head -1)")
cat >"$tmp/app.c" <<'C'
#include <ntbx/fabric.h>
#include <stdio.h>
int main(void)
{
	struct ntbx_fabric_params p = { .nodes = 2, .topology = NTBX_TOPO_SWITCH,
	                                .window = 8 << 20, .gid = -1 };
	struct ntbx_fabric *f;
	if (ntbx_fabric_create("app", &p) || ntbx_fabric_join("app", 1, &f)) {
		fprintf(stderr, "%s\n", ntbx_errmsg());
		return 1;
	}
	printf("node %d of %d\n", ntbx_fabric_node(f), ntbx_fabric_nodes(f));
	ntbx_fabric_leave(f);
	return ntbx_fabric_destroy("app") != 0;
}
C
pass=0 fail=0
check() { if "$@"; then pass=$((pass + 1)); else echo "FAIL: $*" >&2; fail=$((fail + 1)); fi; }
check test -x "$tmp/prefix/bin/ntbx"
# the node agent, the one libfabric user, is a program of its own: the ntbx
# command (before every program of `ntbx run`) does not pay libfabric's
# providers' start (0.2 s); `ntbx node` finds it from the installed ntbx
check test -x "$tmp/prefix/libexec/ntbx/ntbx-node-agent"
check bash -c "! readelf -d '$tmp/prefix/bin/ntbx' | grep -q 'NEEDED.*libfabric'"
check bash -c "'$tmp/prefix/bin/ntbx' node --help | grep -q 'usage: ntbx node serve'"
check test -f "$tmp/prefix/include/ntbx/qp.h"
check pkg-config --exists ntbx
cc "$tmp/app.c" $cflags -L"$libdir" -lntbx -Wl,-rpath,"$libdir" -o "$tmp/app"
out=$(NTBX_SHM_DIR=$shm "$tmp/app")
check test "$out" = "node 1 of 2"
cc "$tmp/app.c" $cflags "$libdir/libntbx.a" -lpthread -o "$tmp/app-static"
out=$(NTBX_SHM_DIR=$shm "$tmp/app-static")
check test "$out" = "node 1 of 2"
echo "install: $pass passed, $fail failed"
[ "$fail" = 0 ]
