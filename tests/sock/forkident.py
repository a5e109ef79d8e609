#!/usr/bin/env python3
"""tests/sock/forkident.py PORT LIVEFILE — a joined process's forked
children take their identity on the fabric (their own open file
description of LIVEFILE, holding a read lock on byte 1, the handle's share
of the node's liveness, and a waiter slot: counted as those read locks in
/proc/locks; wake objects take slots too, so slots are not counted) at
their first use of the fabric, not at fork (src/sock/self.c, sk_fab):

  A  closes the listener it inherited and uses nothing else: no identity;
  B  connects to the parent's registered listener: one identity, and the
     64-byte exchange works;
  C  lowers RLIMIT_NOFILE (sandboxed: src/sock/priv.c) and then connects:
     no identity, and the exchange works (on kernel TCP).

Prints one line per check: "ok NAME" or "FAIL NAME: why"."""
import os
import resource
import socket
import sys

from xor64 import answer, exchange as xchg, request, serve_conn

port, live = int(sys.argv[1]), sys.argv[2]
SHARE = 1   # src/dev/shm/shm.c, attach: each handle's share of the node


def identities():
    return len(identity_lines())


def identity_lines():
    st = os.stat(live)
    ino = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    out = []
    with open("/proc/locks") as f:
        for line in f:
            w = line.replace("->", "").split()
            if len(w) >= 8 and w[1] == "OFDLCK" and w[3] == "READ" and \
                    w[5] == ino and w[6] == w[7] == str(SHARE):
                out.append(line.strip())
    return out


def exchange(i):
    return xchg(port, i) == answer(request(i))


def serve_one(lst):
    c, _ = lst.accept()
    with c:
        serve_conn(c)


def child(lst, body):
    """Fork a child running body(); it reports on a pipe and waits until the
    parent closes the other pipe (so its identity, if any, is counted while it
    lives).  Returns (pid, report_fd, release_fd)."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r1)
        os.close(w2)
        lst.close()
        ok = body()
        os.write(w1, b"1" if ok else b"0")
        os.read(r2, 1)   # until the parent lets go (EOF)
        os._exit(0)
    os.close(w1)
    os.close(r2)
    return pid, r1, w2


def release(pid, rfd, wfd):
    os.close(wfd)
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    return st == 0


def check(name, cond, why):
    if not cond:
        why += " (%s)" % "; ".join(identity_lines())
    print(("ok " + name) if cond else ("FAIL %s: %s" % (name, why)), flush=True)


lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", port))
lst.listen(8)          # registered: this process has joined the fabric
base = identities()
check("parent", base >= 1, "no identity of the joined parent on %s" % live)

# A: never uses the fabric
pid, rfd, wfd = child(lst, lambda: True)
said = os.read(rfd, 1)
n = identities()
check("unused", said == b"1" and n == base,
      "a child that never used the fabric: %d identities, %d before" % (n, base))
check("unused-exit", release(pid, rfd, wfd), "child A failed")

# B: uses it (connects to our registered listener)
pid, rfd, wfd = child(lst, lambda: exchange(1))
serve_one(lst)
said = os.read(rfd, 1)
n = identities()
check("used", said == b"1" and n == base + 1,
      "a child that used the fabric: answer %r, %d identities, %d before"
      % (said, n, base))
check("used-exit", release(pid, rfd, wfd), "child B failed")


def sandboxed():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, hard))
    return exchange(2)


# C: sandboxed first, then connects
pid, rfd, wfd = child(lst, sandboxed)
serve_one(lst)
said = os.read(rfd, 1)
n = identities()
check("sandboxed", said == b"1" and n == base,
      "a sandboxed child: answer %r, %d identities, %d before" % (said, n, base))
check("sandboxed-exit", release(pid, rfd, wfd), "child C failed")
n = identities()
check("after", n == base, "%d identities after the children, %d before" % (n, base))
lst.close()
