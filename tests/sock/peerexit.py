#!/usr/bin/env python3
"""A peer process that dies while the other end writes (tests/sock_sigpipe.sh).

  peerexit.py server PORT READY   accept one client; then obey stdin:
                                  'reply' sends one byte, 'write' writes
                                  until the connection fails, prints the
                                  error and exits 0
  peerexit.py client PORT         connect, send 'hello', then poll() and
                                  read one byte at a time, printing
                                  'got N' after each

SIGPIPE keeps its default action here, as in a C program (psql, pgbench):
the server writes with MSG_NOSIGNAL, so the kernel never raises SIGPIPE and
a death by SIGPIPE (status 141) can only come from ntbx itself.
"""
import errno, select, signal, socket, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)
role, port = sys.argv[1], int(sys.argv[2])

if role == "server":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(4)
    open(sys.argv[3], "w").close()
    a, _ = l.accept()
    got = b""
    while len(got) < 5:
        k = a.recv(5 - len(got))
        assert k, "client left early"
        got += k
    assert got == b"hello", got
    print("accepted", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "reply":
            a.send(b"r", socket.MSG_NOSIGNAL)
            print("replied", flush=True)
        elif cmd == "write":
            chunk, n, err = b"x" * 65536, 0, None
            while n < 100000:
                try:
                    a.send(chunk, socket.MSG_NOSIGNAL)
                    n += 1
                except OSError as e:
                    err = e.errno
                    break
            print("ok server survived: %d sends, then %s"
                  % (n, errno.errorcode.get(err, err)), flush=True)
            break
    a.close()
else:
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"hello")
    p = select.poll()
    p.register(c, select.POLLIN)
    n = 0
    while True:
        if not p.poll(60000):
            print("timeout", flush=True)
            sys.exit(1)
        if not c.recv(1):
            break
        n += 1
        print("got", n, flush=True)
