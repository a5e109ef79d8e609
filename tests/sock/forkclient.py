#!/usr/bin/env python3
"""tests/sock/forkclient.py PORT N — N sequential connections to
forkserve.py: each sends 64 bytes and checks the 64-byte answer.  Prints
"ok forkclient N"."""
import os
import socket
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    req = bytes((i + k) & 0xFF for k in range(64))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(req)
        got = b""
        while len(got) < 64:
            part = s.recv(64 - len(got))
            if not part:
                break
            got += part
        if got != bytes(b ^ 0x5A for b in req):
            print("FAIL connection", i, "answer", got[:8], file=sys.stderr)
            sys.exit(1)
print("ok forkclient", n)
