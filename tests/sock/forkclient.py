#!/usr/bin/env python3
"""tests/sock/forkclient.py PORT N — N sequential connections to
forkserve.py: each sends 64 bytes and checks the 64-byte answer.  Prints
"ok forkclient N"."""
import sys

from xor64 import answer, exchange, request

port, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    got = exchange(port, i)
    if got != answer(request(i)):
        print("FAIL connection", i, "answer", got[:8], file=sys.stderr)
        sys.exit(1)
print("ok forkclient", n)
