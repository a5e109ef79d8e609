#!/usr/bin/env python3
"""A multi-threaded memcached client for tests/sock_memcached.sh.

  mc.py PORT NTHREADS CONNS ROUNDS LIMIT_MS
      NTHREADS threads, each with CONNS connections and its own poll loop,
      each round a set then a get of a key of its own on every connection
      (text protocol); every reply is checked and no request may take
      LIMIT_MS or more.  Prints "ok mc ..." or "FAIL ...".
"""
import select, socket, sys, threading, time

def ask(p, c, req, end, limit, what):
    t0 = time.monotonic()
    c.sendall(req)
    got = b""
    while not got.endswith(end):
        left = limit * 4 - (time.monotonic() - t0) * 1000
        if left <= 0:
            raise RuntimeError("%s: no reply after %d ms" % (what, limit * 4))
        for fd, ev in p.poll(left):
            try:
                b = c.recv(65536)
            except BlockingIOError:
                continue
            if not b:
                raise RuntimeError("%s: EOF" % what)
            got += b
    dt = (time.monotonic() - t0) * 1000
    if dt >= limit:
        raise RuntimeError("%s: took %.0f ms (limit %d ms)" % (what, dt, limit))
    return got, dt

def worker(port, t, nconn, rounds, limit, res):
    try:
        conns = []
        for _ in range(nconn):
            c = socket.create_connection(("127.0.0.1", port))
            c.setblocking(False)
            conns.append(c)
        worst = 0.0
        for r in range(rounds):
            for k, c in enumerate(conns):
                p = select.poll()
                p.register(c.fileno(), select.POLLIN)
                key = b"k%d.%d" % (t, k)
                val = b"v%d.%d.%d.%s" % (t, k, r, b"x" * (r % 100))
                what = "thread %d conn %d round %d" % (t, k, r)
                got, dt1 = ask(p, c, b"set %s 0 0 %d\r\n%s\r\n" % (key, len(val), val),
                               b"\r\n", limit, what + " set")
                if got != b"STORED\r\n":
                    raise RuntimeError("%s set: %r" % (what, got[:80]))
                want = b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(val), val)
                got, dt2 = ask(p, c, b"get %s\r\n" % key, b"END\r\n", limit,
                               what + " get")
                if got != want:
                    raise RuntimeError("%s get: %r, want %r" % (what, got[:80], want[:80]))
                worst = max(worst, dt1, dt2)
        for c in conns:
            c.close()
        res[t] = ("ok", worst)
    except Exception as e:
        res[t] = ("FAIL", str(e))

def main():
    port, n, nconn, rounds, limit = (int(x) for x in sys.argv[1:6])
    res = [None] * n
    ths = [threading.Thread(target=worker, args=(port, t, nconn, rounds, limit, res))
           for t in range(n)]
    t0 = time.monotonic()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    bad = [r for r in res if r is None or r[0] != "ok"]
    for r in bad:
        print("FAIL", r[1] if r else "thread did not finish")
    if bad:
        sys.exit(1)
    print("ok mc %d threads x %d connections x %d rounds of set+get: worst "
          "request %.1f ms, total %.2f s" % (n, nconn, rounds,
          max(r[1] for r in res), time.monotonic() - t0))

main()
