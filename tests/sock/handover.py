"""tests/sock/handover.py — an acceptor whose request is taken over under
it (tests/sock_handover.sh, with tests/sock/handover.c loaded after the
preload and HANDOVER_STEAL=1).

One process connects and accepts (the preload never deadlocks that).  The
first accept looks the request up, and the library turns its slot into
another connection right after the look: the acceptor must leave that
slot exactly as it found it, and both ends go on on kernel TCP.  The
second connection must be on the fabric as usual.  Prints one "ok" line
per connection, or "FAIL ...".
"""
import ctypes, socket, sys

lib = ctypes.CDLL(None)
check = lib.handover_check
check.restype = ctypes.c_int

ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(8)
port = ls.getsockname()[1]


def exchange(n):
    c = socket.create_connection(("127.0.0.1", port))
    a, _ = ls.accept()
    r = check()
    msg = b"x%d" % n * 1000
    c.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += a.recv(65536)
    a.sendall(got)
    back = b""
    while len(back) < len(msg):
        back += c.recv(65536)
    c.close()
    a.close()
    return r, back == msg


r, same = exchange(1)
if r != 0 or not same:
    print("FAIL taken over: check %d (-1: not taken over, 1: written), "
          "bytes %s" % (r, "equal" if same else "differ"), flush=True)
    sys.exit(1)
print("ok taken over under the acceptor: the slot left as found, bytes "
      "equal", flush=True)
r, same = exchange(2)
if not same:
    print("FAIL next connection: bytes differ", flush=True)
    sys.exit(1)
print("ok next connection: bytes equal", flush=True)
