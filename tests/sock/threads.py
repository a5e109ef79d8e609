#!/usr/bin/env python3
"""Many event loops in one process, for tests/sock_threads.sh.

  threads.py server PORT READYFILE NTHREADS MODE
      the main thread accepts and hands each connection to one of NTHREADS
      workers (round robin, through the worker's notify pipe, as memcached
      does); each worker runs its own MODE loop ('epoll' or 'poll') over
      its own connections and answers every request line with a reply line.
  threads.py client PORT NTHREADS CONNS ROUNDS MODE LIMIT_MS
      NTHREADS threads, each with CONNS connections and its own MODE loop,
      each doing ROUNDS request/reply exchanges on every connection, one
      connection at a time.  Every reply is checked, and no exchange may
      take LIMIT_MS or more: a lost wake-up shows as the preload's sleep
      cap (1 s) or a hang.  Prints "ok client ..." or "FAIL ...".

With NTBX_SPIN_US=0 every wait is a sleep, so every exchange depends on a
wake-up reaching the right thread: the thread's own loop, not another
one of the same process.
"""
import os, select, socket, sys, threading, time

def make_poller(mode):
    return select.epoll() if mode == "epoll" else select.poll()

def reg(p, mode, fd):
    if mode == "epoll":
        p.register(fd, select.EPOLLIN)
    else:
        p.register(fd, select.POLLIN)

def unreg(p, fd):
    p.unregister(fd)

def wait(p, mode, ms):
    return p.poll(ms / 1000.0 if mode == "epoll" else ms)

def reply_of(line):
    return b"R" + line[::-1][1:] + b"\n"   # reversed, without the newline

def worker(rfd, mode):
    p = make_poller(mode)
    reg(p, mode, rfd)
    conns = {}
    pending = b""
    while True:
        for fd, ev in wait(p, mode, 5000):
            if fd == rfd:
                pending += os.read(rfd, 64)
                while len(pending) >= 4:
                    cfd = int.from_bytes(pending[:4], "little")
                    pending = pending[4:]
                    c = socket.socket(fileno=cfd)
                    c.setblocking(False)
                    conns[cfd] = [c, b""]
                    reg(p, mode, cfd)
                continue
            c, buf = conns[fd]
            try:
                b = c.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionError:
                b = b""
            if not b:
                unreg(p, fd)
                c.close()
                del conns[fd]
                continue
            buf += b
            out = b""
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                out += reply_of(line + b"\n")
            conns[fd][1] = buf
            c.setblocking(True)
            c.sendall(out)
            c.setblocking(False)

def server(port, ready, n, mode):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(256)
    pipes = []
    for _ in range(n):
        r, w = os.pipe()
        pipes.append(w)
        threading.Thread(target=worker, args=(r, mode), daemon=True).start()
    open(ready, "w").close()
    i = 0
    while True:
        c, _ = l.accept()
        fd = c.detach()
        os.write(pipes[i % n], fd.to_bytes(4, "little"))
        i += 1

def client_thread(port, t, nconn, rounds, mode, limit, res):
    try:
        conns = []
        for _ in range(nconn):
            c = socket.create_connection(("127.0.0.1", port))
            c.setblocking(False)
            conns.append(c)
        p = make_poller(mode)
        for c in conns:
            reg(p, mode, c.fileno())
        worst = 0.0
        for r in range(rounds):
            for k, c in enumerate(conns):
                req = b"t%d c%d r%d %s\n" % (t, k, r, b"x" * (r % 50))
                want = reply_of(req)
                t0 = time.monotonic()
                c.sendall(req)
                got = b""
                while len(got) < len(want):
                    left = limit * 4 - (time.monotonic() - t0) * 1000
                    if left <= 0:
                        raise RuntimeError("thread %d conn %d round %d: no "
                                           "reply after %d ms" % (t, k, r, limit * 4))
                    for fd, ev in wait(p, mode, left):
                        if fd != c.fileno():
                            raise RuntimeError("thread %d: unexpected event "
                                               "on fd %d" % (t, fd))
                        try:
                            b = c.recv(65536)
                        except BlockingIOError:
                            continue
                        if not b:
                            raise RuntimeError("thread %d conn %d: EOF" % (t, k))
                        got += b
                dt = (time.monotonic() - t0) * 1000
                worst = max(worst, dt)
                if got != want:
                    raise RuntimeError("thread %d conn %d round %d: reply %r, "
                                       "want %r" % (t, k, r, got[:60], want[:60]))
                if dt >= limit:
                    raise RuntimeError("thread %d conn %d round %d: exchange "
                                       "took %.0f ms (limit %d ms)" %
                                       (t, k, r, dt, limit))
        for c in conns:
            c.close()
        res[t] = ("ok", worst)
    except Exception as e:
        res[t] = ("FAIL", str(e))

def client(port, n, nconn, rounds, mode, limit):
    res = [None] * n
    ths = [threading.Thread(target=client_thread,
                            args=(port, t, nconn, rounds, mode, limit, res))
           for t in range(n)]
    t0 = time.monotonic()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    total = time.monotonic() - t0
    bad = [r for r in res if r is None or r[0] != "ok"]
    if bad:
        for r in bad:
            print("FAIL", r[1] if r else "thread did not finish")
        sys.exit(1)
    worst = max(r[1] for r in res)
    print("ok client %d threads x %d connections x %d rounds (%s): "
          "worst exchange %.1f ms, total %.2f s" %
          (n, nconn, rounds, mode, worst, total))

if __name__ == "__main__":
    a = sys.argv
    if a[1] == "server":
        server(int(a[2]), a[3], int(a[4]), a[5])
    else:
        client(int(a[2]), int(a[3]), int(a[4]), int(a[5]), a[6], int(a[7]))
