#!/usr/bin/env python3
"""Socket test peer for tests/sock_*.sh.

  echo.py server PORT READYFILE   echo server (threads), until killed
  echo.py client PORT SIZE        send SIZE random bytes, read the echo,
                                  compare; half-close; print 'ok N'
  echo.py selftest PORT           one process: connect, write, accept (no
                                  deadlock), echo, half-close, selectors
"""
import hashlib, os, selectors, socket, sys, threading

def serve_conn(c):
    with c:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            c.sendall(b)
        # half-close from the client: we still write, then close

def server(port, ready):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    open(ready, "w").close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve_conn, args=(c,), daemon=True).start()

def client(port, size):
    data = os.urandom(size)
    c = socket.create_connection(("127.0.0.1", port))
    got = bytearray()
    def reader():
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            got.extend(b)
    t = threading.Thread(target=reader)
    t.start()
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    t.join()
    c.close()
    if bytes(got) != data:
        print("MISMATCH: sent %d bytes, got %d back" % (len(data), len(got)))
        sys.exit(1)
    print("ok", size, hashlib.sha256(data).hexdigest()[:16])

def selftest(port):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(4)
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"hello before accept")          # must not block
    a, _ = l.accept()
    assert a.recv(100) == b"hello before accept"
    a.sendall(b"x" * 100000)
    got = b""
    while len(got) < 100000:
        got += c.recv(1 << 16)
    assert got == b"x" * 100000
    # after the switch: both directions
    c.sendall(b"ping")
    assert a.recv(10) == b"ping"
    # selectors (epoll) with a timeout: nothing to read yet
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ)
    assert sel.select(timeout=0.05) == []
    c.sendall(b"later")
    ev = sel.select(timeout=5)
    assert ev and ev[0][1] & selectors.EVENT_READ, ev
    assert a.recv(10) == b"later"
    # nonblocking read: EAGAIN
    a.setblocking(False)
    try:
        a.recv(10)
        raise AssertionError("expected EAGAIN")
    except BlockingIOError:
        pass
    a.setblocking(True)
    # half-close: a sees EOF, c can still read
    c.shutdown(socket.SHUT_WR)
    assert a.recv(10) == b""
    a.sendall(b"after half-close")
    assert c.recv(100) == b"after half-close"
    a.close()
    assert c.recv(100) == b""
    c.close()
    sel.close()
    l.close()
    print("ok selftest")

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "server":
        server(int(sys.argv[2]), sys.argv[3])
    elif cmd == "client":
        client(int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "selftest":
        selftest(int(sys.argv[2]))
