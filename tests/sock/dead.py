"""tests/sock/dead.py MODE NTBX — peers that die without closing, run
under `ntbx run` (tests/sock_dead.sh).

zombie:  a writer blocked on a full ring whose reader was killed and not
         reaped (a zombie answers kill(pid, 0)) fails with EPIPE/ECONNRESET
         within 5 s.
pidns:   the same with the reader in a PID namespace of its own (pid 1
         there), killed with its namespace.
forked:  the killed child of an accept-and-fork server: the client's first
         write succeeds and the second fails, as on kernel TCP.
nbeof:   a reader that only retries non-blocking reads, and one that
         only calls poll() with timeout 0, each on a connection whose peer
         was killed: both get the end of stream within 5 s (the shadow is
         looked at once a millisecond by such calls, not at every one).
waves N W: W waves of N clients at once that _exit() without closing
         against a threaded server; then a new connection must be on the
         fabric.  Prints "wave K" when wave K's clients have exited and the
         server has closed their connections (the script then counts the
         node's allocations).
"""
import json, os, signal, socket, subprocess, sys, threading, time

mode, NTBX = sys.argv[1], sys.argv[2]


KIDS = []                              # killed on the way out, however


def fail(msg):
    print("FAIL", msg, flush=True)
    for k in KIDS:
        for kill in (os.killpg, os.kill):   # its group, if it leads one
            try:
                kill(k, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(k, 0)           # a zombie is not left for init
        except ChildProcessError:
            pass
    sys.exit(1)


def on_fabric(port):
    out = subprocess.run([NTBX, "stat", "--json"], capture_output=True,
                         text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return any(r.get("kind") == "conn" and r["remote"].endswith(":%d" % port)
               and r["path"] == "fabric" for r in rows)


def listener():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    return ls, ls.getsockname()[1]


# One byte each way after connect: a connector switches to the fabric at
# its next call (a first byte it sent while negotiating goes by TCP), and
# `ntbx stat` lists it as negotiating until then.
def connect_switched(port):
    c = socket.create_connection(("127.0.0.1", port))
    c.send(b"x")
    c.recv(1)
    return c


def accept_switched(ls):
    a, _ = ls.accept()
    a.recv(1)
    a.send(b"!")
    return a


def write_err(s, buf, limit):
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < limit:
            s.send(buf)
    except (BrokenPipeError, ConnectionResetError) as e:
        return e, time.monotonic() - t0
    return None, time.monotonic() - t0


def fill_ring(a, port, case):
    """Fill the ring of accepted socket @a (the next write blocks); it
    must be on the fabric."""
    a.setblocking(False)
    while True:
        try:
            a.send(b"y" * 65536)
        except BlockingIOError:
            break
    if not on_fabric(port):
        fail("%s: the connection is not on the fabric" % case)


def write_after_death(a, case):
    """A blocking write to @a, whose reader is dead: it must fail within
    5 s (an alarm ends a write that never returns)."""
    a.setblocking(True)

    def blocked(*_):
        raise TimeoutError("the write is still blocked")
    signal.signal(signal.SIGALRM, blocked)
    signal.alarm(10)
    try:
        e, dt = write_err(a, b"z" * 65536, 10)
    except TimeoutError:
        e, dt = None, 10.0
    signal.alarm(0)
    if e is None or dt > 5:
        fail("%s: writer got %r after %.1f s" % (case, e, dt))
    return e, dt


if mode == "zombie":
    ls, port = listener()
    # One pipe each way: with one pipe for both, the child could read
    # back its own "connected" byte and exit, and the parent would wait
    # on the pipe for ever.
    up_r, up_w = os.pipe()             # child -> parent: connected
    hold_r, hold_w = os.pipe()         # parent -> child: never written
    pid = os.fork()
    if pid == 0:                       # the reader: connects, never reads
        os.close(up_r)
        os.close(hold_w)               # so that the parent's exit ends us
        c = connect_switched(port)
        os.write(up_w, b"c")
        os.read(hold_r, 1)             # until killed
        os._exit(0)
    KIDS.append(pid)
    os.close(up_w)
    os.close(hold_r)
    a = accept_switched(ls)
    if os.read(up_r, 1) != b"c":
        fail("zombie: the reader did not connect")
    fill_ring(a, port, "zombie")
    os.kill(pid, signal.SIGKILL)
    while open("/proc/%d/stat" % pid).read().split(") ")[1][0] != "Z":
        time.sleep(0.01)               # wait for the state, not a time
    e, dt = write_after_death(a, "zombie")
    os.waitpid(pid, 0)
    print("ok zombie: %s after %.2f s" % (type(e).__name__, dt))

elif mode == "nbeof":
    import select
    ls, port = listener()
    up_r, up_w = os.pipe()             # child -> parent: connected twice
    hold_r, hold_w = os.pipe()         # parent -> child: never written
    pid = os.fork()
    if pid == 0:                       # two connections, then waits
        os.close(up_r)
        os.close(hold_w)
        cs = [connect_switched(port) for _ in range(2)]
        os.write(up_w, b"c")
        os.read(hold_r, 1)             # until killed
        os._exit(0)
    KIDS.append(pid)
    os.close(up_w)
    os.close(hold_r)
    conns = [accept_switched(ls) for _ in range(2)]
    if os.read(up_r, 1) != b"c":
        fail("nbeof: the peer did not connect")
    if not on_fabric(port):
        fail("nbeof: the connections are not on the fabric")
    for a in conns:
        a.setblocking(False)
        try:
            a.recv(1)                  # ring empty, peer alive
            fail("nbeof: a read with nothing sent returned")
        except BlockingIOError:
            pass
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    KIDS.remove(pid)
    # 1: non-blocking reads only, no wait between them
    t0 = time.monotonic()
    got = None
    while time.monotonic() - t0 < 5:
        try:
            got = conns[0].recv(1)
            break
        except BlockingIOError:
            pass
    if got != b"":
        fail("nbeof: non-blocking reads got %r within 5 s, not the end "
             "of stream" % (got,))
    dt1 = time.monotonic() - t0
    # 2: poll() with timeout 0 only
    p = select.poll()
    p.register(conns[1].fileno(), select.POLLIN)
    t0 = time.monotonic()
    ev = []
    while time.monotonic() - t0 < 5 and not ev:
        ev = p.poll(0)
    if not ev or conns[1].recv(1) != b"":
        fail("nbeof: poll(0) said %r within 5 s, and no end of stream" % ev)
    dt2 = time.monotonic() - t0
    print("ok nbeof: end of stream after %.1f ms (reads), %.1f ms (poll 0)"
          % (dt1 * 1e3, dt2 * 1e3))

elif mode == "pidns":
    # The same, with the reader in a PID namespace of its own (it is pid
    # 1 there: a pid recorded by the reader names another process here),
    # killed with its namespace.
    import ctypes
    # the reader is unshare's child: when unshare dies it comes to us, and
    # we reap it (PR_SET_CHILD_SUBREAPER), so nothing of it outlives us
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    ls, port = listener()
    code = ("import os, socket, sys\n"
            "c = socket.create_connection(('127.0.0.1', %d))\n"
            "c.send(b'x'); c.recv(1)\n"
            "print('c', os.getpid(), flush=True)\n"
            "sys.stdin.read()\n" % port)
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child",
                          sys.executable, "-c", code],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    KIDS.append(p.pid)
    a = accept_switched(ls)
    line = p.stdout.readline().split()
    if line[:1] != [b"c"]:
        fail("pidns: the reader did not connect")
    fill_ring(a, port, "pidns")
    kids = open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
    os.kill(p.pid, signal.SIGKILL)     # --kill-child: the reader goes too
    p.wait()
    for k in kids:                     # ours now: reaped, not left behind
        os.waitpid(int(k), 0)
    e, dt = write_after_death(a, "pidns")
    print("ok pidns: reader pid %s in its namespace, %s after %.2f s"
          % (line[1].decode(), type(e).__name__, dt))

elif mode == "forked":
    ls, port = listener()
    spid = os.fork()
    if spid == 0:                      # accept-and-fork server, one client
        os.setpgid(0, 0)               # its child goes with it (below)
        a, _ = ls.accept()
        child = os.fork()
        if child == 0:
            ls.close()
            a.sendall(a.recv(16))      # the child serves: echo once
            signal.pause()
            os._exit(0)
        a.close()
        os.waitpid(child, 0)           # reaped after the test kills it
        os._exit(0)
    KIDS.append(spid)
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"ping")
    if c.recv(16) != b"ping":
        fail("forked: no echo")
    if not on_fabric(port):
        fail("forked: the connection is not on the fabric")
    # the serving child is the server's only child
    kids = open("/proc/%d/task/%d/children" % (spid, spid)).read().split()
    os.kill(int(kids[0]), signal.SIGKILL)
    os.waitpid(spid, 0)                # the server reaped its child
    try:
        c.send(b"one")
    except OSError as e:
        fail("forked: first write failed: %r (kernel TCP accepts it)" % e)
    try:
        c.send(b"two")
        fail("forked: second write succeeded")
    except (BrokenPipeError, ConnectionResetError) as e:
        print("ok forked: first write accepted, second %s" % type(e).__name__)

elif mode == "waves":
    n, waves = int(sys.argv[3]), int(sys.argv[4])
    ls, port = listener()

    # The clients are forked by a spawner forked before any thread starts:
    # a fork of a threaded process may copy a lock (the allocator's) that
    # another thread holds, and hang the child (glibc's malloc guards
    # against that; the sanitizers' allocator does not).
    cmd_r, cmd_w = os.pipe()
    done_r, done_w = os.pipe()
    spawner = os.fork()
    if spawner == 0:
        os.close(cmd_w)
        os.close(done_r)
        ls.close()
        while os.read(cmd_r, 1):
            # Two pipes: "up" (each client says it is connected) and "go"
            # (its end of file lets every client of the wave exit at once).
            # Each client closes its copies of the ends it does not use, so
            # the spawner's close of go_w is the only thing that ends the
            # wave; one pipe for both directions let a client read
            # another's byte.
            up_r, up_w = os.pipe()
            go_r, go_w = os.pipe()
            kids = []
            for i in range(n):
                pid = os.fork()
                if pid == 0:
                    os.close(go_w)
                    os.close(up_r)
                    c = socket.create_connection(("127.0.0.1", port))
                    c.send(b"hello")
                    c.recv(1)
                    os.write(up_w, b"c")   # connected, on whatever path
                    os.close(up_w)
                    os.read(go_r, 1)       # all at once, then gone unclosed
                    os._exit(0)
                kids.append(pid)
            os.close(up_w)
            os.close(go_r)
            got = 0
            while got < n:
                b = os.read(up_r, n - got)
                if not b:
                    break
                got += len(b)
            os.close(go_w)                 # every client exits now
            for pid in kids:
                os.waitpid(pid, 0)
            os.close(up_r)
            os.write(done_w, bytes([1 if got == n else 0]))
        os._exit(0)
    KIDS.append(spawner)
    os.close(cmd_r)
    os.close(done_w)

    # Connections the server has accepted and not yet closed: a wave is
    # over when its clients have exited and the server has closed all of
    # theirs (it sees their end of stream), so the script counts what is
    # left after the server's closes, not a race with them.
    cv = threading.Condition()
    opened = [0]

    def serve(a):
        while a.recv(4096):
            a.send(b"k")
        a.close()
        with cv:
            opened[0] -= 1
            cv.notify_all()

    def acceptor():
        while True:
            a, _ = ls.accept()
            with cv:
                opened[0] += 1
            threading.Thread(target=serve, args=(a,), daemon=True).start()
    threading.Thread(target=acceptor, daemon=True).start()
    for wv in range(waves):
        os.write(cmd_w, b"w")
        r = os.read(done_r, 1)
        if r != b"\x01":
            fail("wave %d: not every one of %d clients connected" % (wv, n))
        with cv:
            if not cv.wait_for(lambda: opened[0] == 0, 20):
                fail("wave %d: the server still has %d connections of "
                     "exited clients open after 20 s" % (wv, opened[0]))
        print("wave", wv, flush=True)
        if not sys.stdin.readline():   # the script counts allocations
            fail("waves: the script went away")
    os.close(cmd_w)
    os.waitpid(spawner, 0)
    del KIDS[:]
    c = socket.create_connection(("127.0.0.1", port))
    c.send(b"last")
    c.recv(1)
    if not on_fabric(port):
        fail("waves: a new connection after the waves is not on the fabric")
    print("ok waves: %d x %d clients exited unclosed; a new connection is "
          "on the fabric" % (waves, n))
