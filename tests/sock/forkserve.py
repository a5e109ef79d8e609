#!/usr/bin/env python3
"""tests/sock/forkserve.py — a fork-per-connection server, as inetd or
Python's ForkingTCPServer serve: each child closes the listener it
inherited, answers one 64-byte request and exits.

  forkserve.py PORT N READY CLOSED GO
    listen on 127.0.0.1:PORT, write READY; serve N connections; then close
    the listener (the process keeps running), write CLOSED, and wait for
    the file GO (at most 60 s) before exiting.
"""
import os
import socket
import sys
import time

from xor64 import serve_conn

port, n = int(sys.argv[1]), int(sys.argv[2])
ready, closed, go = sys.argv[3], sys.argv[4], sys.argv[5]

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(64)
open(ready, "w").close()
for _ in range(n):
    conn, _ = ls.accept()
    pid = os.fork()
    if pid == 0:
        ls.close()   # the inherited listener: the parent's registration stays
        ok = serve_conn(conn)
        conn.close()
        os._exit(0 if ok else 2)
    conn.close()
    _, st = os.waitpid(pid, 0)
    if st != 0:
        print("FAIL child status", st, file=sys.stderr)
        sys.exit(1)
ls.close()   # ours: unregistered now, while this process lives on
open(closed, "w").close()
end = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < end:
    time.sleep(0.02)
print("ok forkserve", n)
