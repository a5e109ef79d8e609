#!/usr/bin/env python3
"""One process: connect, accept (on the fabric), fork and exec a child that
inherits the accepted socket and uses it; then end of stream after both
the parent's copy and the child's are closed.  Usage: exec_child.py PORT"""
import os, socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(1)
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"abc")
a, _ = l.accept()
assert a.recv(3) == b"abc"
c.sendall(b"on-fabric")
assert a.recv(9) == b"on-fabric"
fd = a.fileno(); os.set_inheritable(fd, True)
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-c",
        "import socket,os; s=socket.socket(fileno=%d); s.sendall(b'from-exec'); print('child got', s.recv(5)); s.close()" % fd])
a.close()
print("parent got", c.recv(9))
c.sendall(b"hello")
os.waitpid(pid, 0)
ok = c.recv(10) == b""
print("eof:", ok)
sys.exit(0 if ok else 1)
