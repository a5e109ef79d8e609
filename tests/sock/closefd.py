#!/usr/bin/env python3
"""Fabric sockets closed behind the preload's back (tests/sock_closefd.sh).

  closefd.py HOW PORT   HOW: syscall (syscall(SYS_close), as libuv does),
                        closerange (os.closerange: close_range on glibc
                        2.34+), closefrom, raw (libc's own syscall(),
                        which the preload never sees: a close it cannot
                        know of)

A connection is made and used on the fabric; its connector descriptor is
closed that way; a new socket is made, which must get the same number, and
connected to the same listener: it must behave as a fresh socket (its bytes
reach its own acceptor, on the fabric, and the old peer reads end of
stream, not those bytes).  (closefrom closes the acceptor instead, the
highest descriptor.)  Prints 'ok HOW ...'.
"""
import ctypes, os, socket, sys

HOW, PORT = sys.argv[1], int(sys.argv[2])
g = ctypes.CDLL(None, use_errno=True)          # the global scope: the preload
libc = ctypes.CDLL("libc.so.6", use_errno=True)  # libc itself, behind it
SYS_close = 3                                   # x86_64


def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            break
        b += k
    return bytes(b)


l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", PORT))
l.listen(4)


def pair():
    c = socket.socket()
    c.connect(("127.0.0.1", PORT))
    c.sendall(b"w1")
    a, _ = l.accept()
    assert recvn(a, 2) == b"w1"
    c.sendall(b"w2")                  # on the fabric from here
    assert recvn(a, 2) == b"w2"
    a.sendall(b"w3")
    assert recvn(c, 2) == b"w3"
    return c, a


c, a = pair()
# the victim: the connector, or for closefrom the highest descriptor (the
# acceptor), so that nothing else is closed
victim, other = (a, c) if HOW == "closefrom" else (c, a)
fd = victim.detach()                   # Python forgets it; we close it
if HOW == "syscall":
    r = g.syscall(SYS_close, fd)
elif HOW == "closerange":
    os.closerange(fd, fd + 1)
    r = 0
elif HOW == "closefrom":
    assert fd > max(other.fileno(), l.fileno()), "closefrom would close more"
    g.closefrom(fd)
    r = 0
elif HOW == "raw":
    r = libc.syscall(SYS_close, fd)
else:
    raise SystemExit("unknown HOW " + HOW)
assert r == 0, ("close", HOW, ctypes.get_errno())
try:
    os.fstat(fd)
    raise AssertionError("descriptor %d still open" % fd)
except OSError:
    pass

other.settimeout(30)                   # a failure, not a hang
assert recvn(other, 1) == b"", "the old peer did not see end of stream"
c2, a2 = pair()                        # a new socket, the same number
assert c2.fileno() == fd, ("number not reused", c2.fileno(), fd)
c2.sendall(b"fresh")
assert recvn(a2, 5) == b"fresh"
a2.sendall(b"back")
assert recvn(c2, 4) == b"back"
other.setblocking(False)
try:
    k = other.recv(10)
    assert k == b"", ("the old peer got", k)
except BlockingIOError:
    raise AssertionError("the old peer's connection is still open")
for s in (c2, a2, other, l):
    s.close()
print("ok %s: fd %d reused by a fresh socket, on its own connection" % (HOW, fd))
