"""A fabric socket passed with SCM_RIGHTS to an unrelated process.

  fdpass.py holder UNIXPATH FLAG     receive one socket on UNIXPATH (after
                                     FLAG exists: the sender has closed its
                                     copy by then), echo on it until EOF
  fdpass.py server PORT UNIXPATH FLAG  accept one TCP connection, pass it to
                                     the holder, close it, create FLAG
  fdpass.py client PORT N            send N numbered 64-byte messages, check
                                     each echo, half-close, expect EOF

Run each under `ntbx run`; each prints "ok ROLE" on success."""
import os, socket, sys, time

role = sys.argv[1]


def wait_path(p):
    for _ in range(2000):           # bounded: 20 s
        if os.path.exists(p):
            return
        time.sleep(0.01)
    sys.exit("no " + p)


if role == "holder":
    path, flag = sys.argv[2], sys.argv[3]
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.bind(path)
    u.listen(1)
    a, _ = u.accept()
    wait_path(flag)                 # the sender has closed its copy
    msg, fds, _, _ = socket.recv_fds(a, 16, 1)
    s = socket.socket(fileno=fds[0])
    n = 0
    while True:
        d = s.recv(65536)
        if not d:
            break
        s.sendall(d)
        n += len(d)
    s.close()
    print("ok holder %d" % n)
elif role == "server":
    port, path, flag = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(1)
    open(flag + ".listening", "w").close()
    c, _ = l.accept()
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(path)
    socket.send_fds(u, [b"x"], [c.fileno()])
    c.close()                       # before the holder has received it
    open(flag, "w").close()
    u.close()
    print("ok server")
elif role == "client":
    port, n = int(sys.argv[2]), int(sys.argv[3])
    s = socket.create_connection(("127.0.0.1", port))
    bad = 0
    for i in range(n):
        m = (b"%08d" % i) * 8
        s.sendall(m)
        got = b""
        while len(got) < 64:
            d = s.recv(64 - len(got))
            if not d:
                sys.exit("early EOF at %d" % i)
            got += d
        bad += got != m
    s.shutdown(socket.SHUT_WR)
    eof = s.recv(10) == b""
    s.close()
    if bad or not eof:
        sys.exit("client: %d bad echoes, eof %s" % (bad, eof))
    print("ok client")
