#!/usr/bin/env bash
# tests/sock_stat.sh — the operator's view of a live connection under
# `ntbx run`: `ntbx stat --prometheus` parses as the text exposition format
# (every sample of a declared family, label syntax, numbers) and carries the
# connection's bytes each way; `ntbx stat --watch --count 2` prints two
# frames with the connection on the fabric; bad option mixes are usage
# errors (exit 2) that name the option.
set -euo pipefail

. "$(dirname "$0")/sock/lib.sh" sock_stat

SIZE=123457
P=$(free_port)
bg "$PY" "$HERE/sock/echo.py" server "$P" "$WORK/ready" 2>/dev/null &
PIDS+=($!)
wait_file "$WORK/ready" || bad "echo server did not start"
# One connection: SIZE bytes there and back, then the views, then close.
run "$PY" -c "
import socket, subprocess, time
c = socket.create_connection(('127.0.0.1', $P)); c.sendall(b'x' * $SIZE)
got = 0
while got < $SIZE: got += len(c.recv(65536))
def view(args, out):
    r = subprocess.run(['$NTBX', 'stat'] + args, capture_output=True, text=True)
    open(out, 'w').write(r.stdout)
    open(out + '.rc', 'w').write('%d %s' % (r.returncode, r.stderr))
# The peer adds its bytes to its counter right after they land (it may
# still be about to when ours are all read): look again until both ways
# show them, bounded.
for _ in range(200):
    view(['--prometheus'], '$WORK/prom')
    both = [l for l in open('$WORK/prom').read().splitlines()
            if l.startswith('ntbx_sock_bytes_total{') and
            '127.0.0.1:$P\"' in l and l.endswith(' $SIZE')]
    if len(both) >= 2:
        break
    time.sleep(0.01)
view(['--watch', '--count', '2', '--interval', '0.2'], '$WORK/watch')
c.close()" 2>"$WORK/client.err" || bad "client: $(tail -3 "$WORK/client.err")"

if [ "$(cat "$WORK/prom.rc" 2>/dev/null)" = "0 " ] &&
   "$PY" - "$WORK/prom" "$P" "$SIZE" >"$WORK/prom.check" 2>&1 <<'PY'
import re, sys
text, port, size = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
types, helps, samples = {}, set(), []
label = r'[a-zA-Z_]\w*="(?:[^"\\\n]|\\.)*"'
sample = re.compile(r'^([a-zA-Z_:][\w:]*)(\{(?:%s)(?:,%s)*\})? (\S+)$' % (label, label))
for n, line in enumerate(text.splitlines(), 1):
    if line.startswith('# HELP '):
        helps.add(line.split()[2])
    elif line.startswith('# TYPE '):
        _, _, name, kind = line.split()
        assert kind in ('counter', 'gauge'), line
        assert name not in types, 'family declared twice: ' + name
        types[name] = kind
    else:
        m = sample.match(line)
        assert m, 'line %d is not a sample: %r' % (n, line)
        name, labels, value = m.groups()
        assert name in types, 'line %d: %s has no # TYPE' % (n, name)
        float(value)   # a number, or ValueError
        samples.append((name, dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or '')), float(value)))
assert types and set(types) == helps, 'every family has HELP and TYPE'
assert all(t.startswith('ntbx_') for t in types), types
for name, kind in types.items():
    assert kind != 'counter' or name.endswith('_total'), name
mine = [s for s in samples if s[0] == 'ntbx_sock_bytes_total'
        and s[1]['remote'] == '127.0.0.1:' + port and s[1]['path'] == 'fabric']
tx = [v for _, l, v in mine if l['dir'] == 'tx']
rx = [v for _, l, v in mine if l['dir'] == 'rx']
assert tx == [size] and rx == [size], 'bytes of the connection: tx %s rx %s' % (tx, rx)
fab = [v for n, l, v in samples if n == 'ntbx_sock_connections' and l['path'] == 'fabric']
assert fab and fab[0] >= 1, 'ntbx_sock_connections{path="fabric"}: %s' % fab
print('ok', len(types), 'families', len(samples), 'samples')
PY
then
	ok "stat --prometheus parses ($(cat "$WORK/prom.check")), the connection's $SIZE bytes each way"
else
	bad "stat --prometheus: $(cat "$WORK/prom.rc" "$WORK/prom.check" 2>&1 | tail -5)"
fi

frames=$(grep -c '^ntbx stat --watch: ' "$WORK/watch" || true)
rows=$(grep -c "127.0.0.1:$P .*fabric" "$WORK/watch" || true)
if [ "$(cat "$WORK/watch.rc" 2>/dev/null)" = "0 " ] && [ "$frames" = 2 ] &&
   [ "$rows" = 2 ] && ! grep -q $'\033' "$WORK/watch"; then
	ok "stat --watch --count 2: two frames, the connection in each, no terminal codes into a file"
else
	bad "stat --watch: $frames frames, $rows rows: $(cat "$WORK/watch.rc" "$WORK/watch" 2>&1 | head -20)"
fi

usage() { # expected text, args...: exit 2 and the text on stderr
	local want=$1 rc=0
	shift
	"$NTBX" stat "$@" >/dev/null 2>"$WORK/u.err" || rc=$?
	if [ "$rc" = 2 ] && grep -q -- "$want" "$WORK/u.err"; then
		ok "stat $*: usage error naming $want"
	else
		bad "stat $*: status $rc, $(cat "$WORK/u.err")"
	fi
}
usage "exclude each other" --watch --prometheus
usage "go with --watch" --count 2
usage "--interval" --watch --interval soon
usage "--count" --watch --count 0

echo "sock_stat: $pass passed, $fail failed"
[ "$fail" = 0 ]
