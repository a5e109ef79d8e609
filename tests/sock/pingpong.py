#!/usr/bin/env python3
"""Ping-pong peer for tests/sock_pairs.sh.

  pingpong.py server PORT READYFILE       echo 64-byte messages, one
                                          connection, until it closes
  pingpong.py client PORT ROUNDS MODE LIMIT_MS
                                          ROUNDS round trips of 64 bytes,
                                          waiting by MODE (block, poll,
                                          epoll); print 'ok client ...' if
                                          all completed and none took more
                                          than LIMIT_MS, else 'FAIL ...'
"""
import select, socket, sys, time

MSG = 64

def recv_exact(c, n, wait):
    buf = bytearray()
    while len(buf) < n:
        wait()
        b = c.recv(n - len(buf))
        if not b:
            raise EOFError("peer closed after %d of %d bytes" % (len(buf), n))
        buf.extend(b)
    return bytes(buf)

def server(port, ready):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    open(ready, "w").close()
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with c:
        while True:
            b = c.recv(MSG)
            if not b:
                return
            c.sendall(b)

def client(port, rounds, mode, limit_ms):
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "poll":
        p = select.poll()
        p.register(c, select.POLLIN)
        wait = lambda: p.poll(5000)
    elif mode == "epoll":
        e = select.epoll()
        e.register(c, select.EPOLLIN)
        wait = lambda: e.poll(5)
    else:
        wait = lambda: None
    msg = b"x" * MSG
    worst = 0.0
    t0 = time.monotonic()
    done = 0
    try:
        for i in range(rounds):
            a = time.monotonic()
            c.sendall(msg)
            if recv_exact(c, MSG, wait) != msg:
                print("FAIL client %s: round %d: wrong bytes" % (mode, i))
                return 1
            worst = max(worst, time.monotonic() - a)
            done += 1
    except (OSError, EOFError) as ex:
        print("FAIL client %s: %d of %d rounds, then %s" % (mode, done, rounds, ex))
        return 1
    c.close()
    total = time.monotonic() - t0
    line = "client %s: %d rounds in %.2f s, slowest %.1f ms" % (
        mode, done, total, worst * 1e3)
    if worst * 1e3 > limit_ms:
        print("FAIL " + line + " (limit %d ms)" % limit_ms)
        return 1
    print("ok " + line)
    return 0

if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                        int(sys.argv[5])))
