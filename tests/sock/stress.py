#!/usr/bin/env python3
"""Stress peers for tests/sock_stress.sh.

  stress.py server PORT READYFILE [fork]  selectors (epoll) echo server;
                                 'fork': accept-and-fork, one child each
  stress.py many PORT N          N concurrent connections exchanging
                                 random-sized checksummed messages
  stress.py cycles PORT N        N connect / 64 B request+reply / close
  stress.py flood PORT           write until the peer goes away; print how
                                 the write ended
  stress.py sink PORT READYFILE  accept one, read until EOF or error; print
                                 bytes and how it ended
"""
import hashlib, os, random, selectors, signal, socket, sys

def server(port, ready, fork=False):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(512)
    open(ready, "w").close()
    if fork:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        while True:
            c, _ = l.accept()
            if os.fork() == 0:
                l.close()
                while True:
                    b = c.recv(65536)
                    if not b:
                        break
                    c.sendall(b)
                c.close()
                os._exit(0)
            c.close()
    sel = selectors.DefaultSelector()
    l.setblocking(False)
    sel.register(l, selectors.EVENT_READ, None)
    out = {}
    while True:
        for key, ev in sel.select():
            if key.data is None:
                try:
                    c, _ = l.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                out[c] = bytearray()
                sel.register(c, selectors.EVENT_READ, "c")
                continue
            c = key.fileobj
            if ev & selectors.EVENT_READ:
                try:
                    b = c.recv(65536)
                except (BlockingIOError, InterruptedError):
                    b = None
                except ConnectionError:
                    b = b""
                if b == b"":
                    sel.unregister(c); c.close(); del out[c]; continue
                if b:
                    out[c] += b
            if out[c]:
                try:
                    n = c.send(out[c])
                    del out[c][:n]
                except BlockingIOError:
                    pass
            sel.modify(c, selectors.EVENT_READ | (selectors.EVENT_WRITE if out[c] else 0), "c")

def many(port, n):
    rnd = random.Random(7)
    sel = selectors.DefaultSelector()
    st = {}
    for i in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        c.setblocking(False)
        msgs = [os.urandom(rnd.randint(1, 70000)) for _ in range(3)]
        data = b"".join(msgs)
        st[c] = [data, 0, bytearray()]
        sel.register(c, selectors.EVENT_READ | selectors.EVENT_WRITE)
    left = n
    while left:
        for key, ev in sel.select(timeout=30):
            c = key.fileobj
            s = st[c]
            if ev & selectors.EVENT_WRITE and s[1] < len(s[0]):
                try:
                    s[1] += c.send(s[0][s[1]:s[1] + 65536])
                except BlockingIOError:
                    pass
                if s[1] == len(s[0]):
                    sel.modify(c, selectors.EVENT_READ)
            if ev & selectors.EVENT_READ:
                try:
                    b = c.recv(65536)
                except BlockingIOError:
                    continue
                s[2] += b
                if len(s[2]) >= len(s[0]):
                    if hashlib.sha256(s[2]).digest() != hashlib.sha256(s[0]).digest():
                        print("MISMATCH on a connection"); sys.exit(1)
                    sel.unregister(c); c.close(); left -= 1
        else:
            pass
    print("ok many", n)

def cycles(port, n):
    for i in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        m = i.to_bytes(4, "little") * 16
        c.sendall(m)
        got = b""
        while len(got) < 64:
            b = c.recv(64 - len(got))
            if not b:
                break
            got += b
        if got != m:
            print("MISMATCH at cycle", i); sys.exit(1)
        c.close()
    print("ok cycles", n)

def flood(port):
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    c = socket.create_connection(("127.0.0.1", port))
    buf = b"z" * 65536
    total = 0
    try:
        while True:
            total += c.send(buf)
    except OSError as e:
        print("flood ended:", type(e).__name__, "after", total)

def sink(port, ready):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(4)
    open(ready, "w").close()
    c, _ = l.accept()
    total = 0
    how = "eof"
    try:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            total += len(b)
            if total > (8 << 20):   # in the middle of the stream: say so
                open(ready + ".mid", "w").close()
    except OSError as e:
        how = type(e).__name__
    print("sink ended:", how, total, flush=True)

if __name__ == "__main__":
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "server":
        server(port, sys.argv[3], len(sys.argv) > 4 and sys.argv[4] == "fork")
    elif cmd == "many":
        many(port, int(sys.argv[3]))
    elif cmd == "cycles":
        cycles(port, int(sys.argv[3]))
    elif cmd == "flood":
        flood(port)
    elif cmd == "sink":
        sink(port, sys.argv[3])
