#!/bin/bash
# bench/pg_syscalls.sh BUILD MODE N OUT — system calls per transaction of
# pgbench -S -c 8 -j 2 -t N (8*N transactions) and of the PostgreSQL
# backends serving it, under kernel TCP (MODE tcp) or `ntbx run` (fab), from
# `perf stat` on pgbench and on the postmaster (its counters are inherited
# by the backends it forks).  As root, with PostgreSQL installed; a timing
# run: under `flock -o /tmp/ntbx-bench.lock`.  Prints tps and one line per
# side; the raw counts are in OUT/pbackend.MODE and OUT/pclient.MODE.
set -euo pipefail
B=$(realpath "$1"); MODE=$2; N=$3; OUT=$4
EVS=raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_futex,context-switches
mkdir -p "$OUT"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
NTBX_SHM_DIR=$(mktemp -d /dev/shm/ntbx-pgsys.XXXXXX)
export NTBX_SHM_DIR
unset NTBX_FABRIC NTBX_NODE NTBX_SOCK NTBX_SOCK_PORTS NTBX_SOCK_BUF NTBX_LOG
TMP=$(mktemp -d)
SP=
cleanup() {
	[ -n "$SP" ] && { kill "$SP" 2>/dev/null || true; wait "$SP" 2>/dev/null || true; }
	rm -rf "$TMP" "$NTBX_SHM_DIR"
}
trap cleanup EXIT
chmod 711 "$TMP"; mkdir "$TMP/pg"; chown postgres: "$TMP/pg"
P=$((21000 + RANDOM % 2000))
pre=(); [ "$MODE" = fab ] && pre=("$B/bin/ntbx" run --)
pg() { "$@" runuser -u postgres -- "$PGBIN/postgres" -D "$TMP/pg" -k "$TMP/pg" \
	-c listen_addresses=127.0.0.1 -p $P -c max_connections=30 -c fsync=off >>"$OUT/pg.log" 2>&1 & SP=$!; }
up() { for _ in $(seq 300); do ss -Hltn "sport = :$P" | grep -q . && return 0; sleep 0.05; done; return 1; }
runuser -u postgres -- "$PGBIN/initdb" -D "$TMP/pg" -A trust -U postgres >/dev/null
pg env; up
"$PGBIN/pgbench" -h 127.0.0.1 -p $P -U postgres -i -s 1 postgres >/dev/null 2>&1
kill $SP; wait $SP || true
pg "${pre[@]}"; up
PM=$(head -1 "$TMP/pg/postmaster.pid")
perf stat -x, -o "$OUT/pbackend.$MODE" -e $EVS -p "$PM" &
ST=$!
sleep 0.5   # perf attached (a bound: it only counts)
perf stat -x, -o "$OUT/pclient.$MODE" -e $EVS "${pre[@]}" "$PGBIN/pgbench" -h 127.0.0.1 -p $P \
	-U postgres -S -c 8 -j 2 -t "$N" postgres >"$OUT/pgbench.$MODE" 2>&1 || true
kill -INT $ST; wait $ST || true
kill -INT "$PM" 2>/dev/null || true
grep -E "^tps" "$OUT/pgbench.$MODE"
for side in backend client; do
	awk -F, -v side=$side -v tx=$((8 * N)) '/^[0-9]/ { sub("syscalls:sys_enter_", "", $3);
		sub("raw_syscalls:sys_enter", "all", $3); s = s sprintf(" %s %.2f", $3, $1 / tx) }
		END { print side ":" s }' "$OUT/p$side.$MODE"
done
