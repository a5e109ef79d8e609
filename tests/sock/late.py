#!/usr/bin/env python3
"""A client started before its server (tests/sock_late.sh).

  late.py PORT TRIED   connect to 127.0.0.1:PORT until it is accepted
                       (creating TRIED after the first refusal, so the
                       test starts the server only then), echo 64 KiB
                       through it, print 'ok ...'

The server is tests/sock/echo.py.  Under ntbx run the connection must go
over the fabric although the client's first look at the listener registry
found nothing.
"""
import os, socket, sys, time

port, tried = int(sys.argv[1]), sys.argv[2]
deadline = time.monotonic() + 60
refused = 0
while True:
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port))
        break
    except ConnectionRefusedError:
        c.close()
        refused += 1
        if refused == 1:
            open(tried, "w").close()
        if time.monotonic() > deadline:
            raise SystemExit("no server after %d tries" % refused)
        time.sleep(0.01)   # a retry loop, as real clients have
assert refused, "the server was up before the client"
data = os.urandom(65536)
c.sendall(data)
got = bytearray()
while len(got) < len(data):
    k = c.recv(65536)
    assert k, "end of stream after %d bytes" % len(got)
    got += k
assert got == data, "bytes changed"
c.close()
print("ok late client: refused %d times, then echoed %d bytes" % (refused, len(data)))
