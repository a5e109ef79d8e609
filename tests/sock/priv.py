"""tests/sock/priv.py — servers that drop privileges, and forking clients.

  server PORT READY USER [fork]  bind as root, then setgroups/setgid/setuid
                                 to USER, then listen and echo each
                                 connection (in a forked child with "fork")
  client PORT N SIZE             N connections, SIZE bytes each way, checked
  forkclient PORT N [warm]       N forked children (after a connection
                                 of the parent's own with "warm"): connect, 64 B request,
                                 64 B reply, exit; prints the time taken
The address is 127.0.0.1, or $PRIV_ADDR (a server on another host).
"""
import os, pwd, socket, sys, time

ADDR = os.environ.get("PRIV_ADDR", "127.0.0.1")


def echo(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()


def server(port, ready, user, mode):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ADDR, port))
    pw = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    assert os.geteuid() == pw.pw_uid and os.getegid() == pw.pw_gid
    s.listen(128)
    open(ready, "w").close()
    while True:
        c, _ = s.accept()
        if mode == "fork":
            if os.fork() == 0:
                s.close()
                echo(c)
                os._exit(0)
            c.close()
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
        else:
            echo(c)


def one(port, size):
    c = socket.create_connection((ADDR, port))
    data = os.urandom(size)
    c.sendall(data)
    got = b""
    while len(got) < size:
        b = c.recv(65536)
        if not b:
            break
        got += b
    c.close()
    return got == data


def client(port, n, size):
    bad = sum(not one(port, size) for _ in range(n))
    print("ok client %d connections of %d bytes" % (n, size) if not bad
          else "bad %d of %d" % (bad, n))
    sys.exit(1 if bad else 0)


def forkclient(port, n, warm):
    if warm:   # the parent is on the fabric first: its children reuse it
        assert one(port, 64)
    t = time.monotonic()
    bad = 0
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0 if one(port, 64) else 1)
        _, st = os.waitpid(pid, 0)
        bad += st != 0
    dt = time.monotonic() - t
    print("ok forkclient %d children in %.3f s" % (n, dt) if not bad
          else "bad %d of %d children" % (bad, n))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "server":
        server(int(a[2]), a[3], a[4], a[5] if len(a) > 5 else "")
    elif a[1] == "client":
        client(int(a[2]), int(a[3]), int(a[4]))
    elif a[1] == "forkclient":
        forkclient(int(a[2]), int(a[3]), len(a) > 4 and a[4] == "warm")
