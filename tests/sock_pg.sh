#!/usr/bin/env bash
# tests/sock_pg.sh — PostgreSQL under `ntbx run` as its users run it: the
# server started by root through runuser (which drops to postgres and then
# execs postgres: the new image reaches the root-owned fabric only through
# the keeper it inherits), a forked backend per connection; pgbench
# initialises a database and runs select-only with 8 clients on 2 threads.
# Every transaction must succeed, the listener must be registered on the
# fabric, every pgbench connection must close on the fabric, and nobody
# may say "stay on kernel TCP".
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_pg

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
[ -x "$PGBIN/postgres" ] && [ -x "$PGBIN/pgbench" ] ||
	{ echo "skip: no PostgreSQL server (scripts/deps.d/sock.txt)"; exit 0; }
[ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 ||
	{ echo "skip: needs root and the postgres user"; exit 0; }
asan_hangs "$PGBIN/postgres" &&
	skip "postgres cannot run with the ASan runtime preloaded (sanitizer build)"

chmod 711 "$WORK"
mkdir "$WORK/data"
chown postgres: "$WORK/data"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/data" -A trust -U postgres \
	>"$WORK/initdb.out" 2>&1 || { cat "$WORK/initdb.out"; bad "initdb"; exit 1; }

P=$(free_port)
bg runuser -u postgres -- "$PGBIN/postgres" -D "$WORK/data" -k "$WORK/data" \
	-c listen_addresses=127.0.0.1 -p "$P" -c max_connections=30 \
	-c shared_buffers=16MB -c fsync=off 2>"$WORK/pg.err" &
PIDS+=($!)
wait_port "$P" || { tail "$WORK/pg.err"; bad "postgres did not listen"; exit 1; }
said_tcp() { grep -h "stay on kernel TCP" "$@" 2>/dev/null | head -2 || true; }

pgb() { run "$PGBIN/pgbench" -h 127.0.0.1 -p "$P" -U postgres "$@" postgres; }
st=0
pgb -i -s 1 >"$WORK/init.out" 2>"$WORK/init.err" || st=$?
if [ "$st" -eq 0 ] && grep -q "path fabric" "$WORK/init.err"; then
	ok "pgbench -i: database initialised, on the fabric"
else
	bad "pgbench -i: status $st: $(tail -n3 "$WORK/init.err")"
fi

st=0
pgb -S -c 8 -j 2 -t 300 >"$WORK/sel.out" 2>"$WORK/sel.err" || st=$?
done_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/sel.out")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/sel.out")
fab=$(grep -c "path fabric" "$WORK/sel.err" || true)
why=$(said_tcp "$WORK/pg.err" "$WORK/sel.err" "$WORK/init.err")
if [ "$st" -eq 0 ] && [ "${done_tx:-0}" = 2400 ] && [ "${failed:-1}" = 0 ] &&
   [ "$fab" -ge 8 ] && [ -z "$why" ] &&
   grep -q "listener 127.0.0.1:$P registered" "$WORK/pg.err"; then
	ok "pgbench -S -c 8 -j 2: 2400 transactions, $fab connections on the fabric, $(grep -o 'tps = [0-9.]*' "$WORK/sel.out" | head -n1)"
else
	bad "pgbench -S -c 8 -j 2: status $st, ${done_tx:-?} done, ${failed:-?} failed, $fab on the fabric: $why $(tail -n3 "$WORK/sel.err"; tail -n3 "$WORK/pg.err")"
fi

echo "sock_pg: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
