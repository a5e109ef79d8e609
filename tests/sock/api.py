#!/usr/bin/env python3
"""Socket calls beyond read and write, on connections that go over the
fabric under `ntbx run` (tests/sock_api.sh); every check also holds on
kernel TCP, so the script runs unchanged without the preload.

  api.py CASE PORT      CASE: mmsg splice timeo linger epipe outq vfork
                        epollex epollfork epollmix cork ipv6 asyncio

Each case connects and accepts in one process (the connector's first
write goes by TCP, the next ones on the fabric once the acceptor has
answered), checks, prints 'ok CASE ...' and exits 0; anything else is a
failure.
"""
import asyncio, ctypes, errno, fcntl, hashlib, os, select, socket, struct
import subprocess, sys, threading, time

PORT = int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)   # the global scope: the preload


def pair(fam=socket.AF_INET, lhost="127.0.0.1", chost=None, cfam=None):
    """A connected (connector, acceptor) pair, past the switch."""
    l = socket.socket(fam)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        l.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    l.bind((lhost, PORT))
    l.listen(4)
    c = socket.socket(cfam or fam)
    c.connect((chost or lhost, PORT))
    c.sendall(b"w1")
    a, _ = l.accept()
    l.close()
    assert recvn(a, 2) == b"w1"
    c.sendall(b"w2")                      # on the fabric from here
    assert recvn(a, 2) == b"w2"
    a.sendall(b"w3")
    assert recvn(c, 2) == b"w3"
    return c, a


def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            break
        b += k
    return bytes(b)


def fill(c):
    """Write on nonblocking @c until EAGAIN; returns the bytes written."""
    c.setblocking(False)
    chunk, total = bytes(range(256)) * 256, 0
    while True:
        try:
            total += c.send(chunk)
        except BlockingIOError:
            break
    c.setblocking(True)
    return total


def drain(a, total):
    got = recvn(a, total)
    assert len(got) == total, (len(got), total)
    ref = bytes(range(256)) * 256
    assert all(got[i:i + 65536] == ref[:len(got[i:i + 65536])]
               for i in range(0, total, 65536)), "bytes changed"


# ------------------------------------------------------------- mmsg

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]


def mvec(bufs):
    """An mmsghdr array, one message of one iovec per buffer."""
    n = len(bufs)
    m = (mmsghdr * n)()
    keep = []
    for i, b in enumerate(bufs):
        v = (iovec * 1)()
        v[0].base = ctypes.addressof(b)
        v[0].len = len(b)
        keep.append(v)
        m[i].hdr.iov = v
        m[i].hdr.iovlen = 1
    return m, keep


def sendmmsg(fd, datas, flags=0):
    bufs = [ctypes.create_string_buffer(d, len(d)) for d in datas]
    m, keep = mvec(bufs)
    r = libc.sendmmsg(fd, m, len(datas), flags)
    return r, [m[i].len for i in range(len(datas))], ctypes.get_errno()


def recvmmsg(fd, sizes, flags=0, timeout=None):
    bufs = [ctypes.create_string_buffer(n) for n in sizes]
    m, keep = mvec(bufs)
    ts = None
    if timeout is not None:
        ts = struct.pack("qq", int(timeout), int((timeout % 1) * 1e9))
        ts = ctypes.create_string_buffer(ts, 16)
    r = libc.recvmmsg(fd, m, len(sizes), flags, ts)
    got = [bufs[i].raw[:m[i].len] for i in range(max(r, 0))]
    return r, got, ctypes.get_errno()


def case_mmsg():
    c, a = pair()
    r, lens, _ = sendmmsg(c.fileno(), [b"ab", b"cde", b"fghi"])
    assert (r, lens) == (3, [2, 3, 4]), (r, lens)
    assert recvn(a, 9) == b"abcdefghi"
    c.sendall(b"0123456789")
    r, got, _ = recvmmsg(a.fileno(), [4, 4])
    assert (r, got) == (2, [b"0123", b"4567"]), (r, got)
    r, got, _ = recvmmsg(a.fileno(), [4, 4, 4], socket.MSG_DONTWAIT)
    assert (r, got) == (1, [b"89"]), (r, got)
    r, got, e = recvmmsg(a.fileno(), [4], socket.MSG_DONTWAIT)
    assert (r, e) == (-1, errno.EAGAIN), (r, e)
    # MSG_WAITFORONE: blocks for the first message only
    c.sendall(b"xyz")
    r, got, _ = recvmmsg(a.fileno(), [2, 2, 2], 0x10000)
    assert (r, got) == (2, [b"xy", b"z"]), (r, got)
    # nonblocking sendmmsg until EAGAIN: counts stop at a partial message
    c.setblocking(False)
    big = [bytes([i]) * (200 << 10) for i in range(4)]
    sent = bytearray()
    while True:
        r, lens, e = sendmmsg(c.fileno(), big)
        if r < 0:
            assert e == errno.EAGAIN, e
            break
        assert 1 <= r <= 4
        for i in range(r):
            assert lens[i] == len(big[i]) or i == r - 1, (r, lens)
            sent += big[i][:lens[i]]
    c.setblocking(True)
    assert recvn(a, len(sent)) == bytes(sent)
    # end of stream: every message of a recvmmsg is 0 bytes long
    c.shutdown(socket.SHUT_WR)
    r, got, _ = recvmmsg(a.fileno(), [8, 8])
    assert (r, got) == (2, [b"", b""]), (r, got)
    c.close(); a.close()
    print("ok mmsg: counts, partial messages, MSG_WAITFORONE, EAGAIN, EOF")


# ------------------------------------------------------------- splice

def case_splice():
    c, a = pair()
    r, w = os.pipe()
    # socket -> pipe: what is there, up to len
    c.sendall(b"hello splice")
    n = os.splice(a.fileno(), w, 100)
    assert n == 12 and os.read(r, 100) == b"hello splice", n
    # pipe -> socket
    data = os.urandom(50000)
    os.write(w, data)
    n = 0
    while n < len(data):
        n += os.splice(r, c.fileno(), len(data) - n)
    assert recvn(a, len(data)) == data
    # nothing to read: a nonblocking socket (SPLICE_F_NONBLOCK is for
    # the pipe end only, as in the kernel), an empty pipe
    a.setblocking(False)
    for src, dst, fl in ((a.fileno(), w, 0),
                         (r, c.fileno(), os.SPLICE_F_NONBLOCK)):
        try:
            os.splice(src, dst, 10, flags=fl)
            raise AssertionError("splice with nothing to move returned")
        except BlockingIOError:
            pass
    a.setblocking(True)
    # neither end a pipe: EINVAL; an offset on a socket or pipe: ESPIPE
    for args in ((a.fileno(), c.fileno(), 10), (a.fileno(), w, 10, 0)):
        try:
            os.splice(*args)
            raise AssertionError("splice%r returned" % (args,))
        except OSError as e:
            assert e.errno in (errno.EINVAL, errno.ESPIPE), e
    # 8 MB both ways through pipes, in threads (pipes hold 64 KB)
    big = os.urandom(8 << 20)
    r2, w2 = os.pipe()
    out = bytearray()

    def feed():                       # bytes -> pipe -> fabric socket c
        rr, ww = os.pipe()

        def wr():
            os.write(ww, big)
            os.close(ww)
        t = threading.Thread(target=wr)
        t.start()
        while os.splice(rr, c.fileno(), 1 << 20):
            pass
        t.join()
        os.close(rr)
        c.shutdown(socket.SHUT_WR)

    def drainp():                     # pipe r2 -> out
        while True:
            b = os.read(r2, 1 << 20)
            if not b:
                break
            out.extend(b)
    ts = [threading.Thread(target=feed), threading.Thread(target=drainp)]
    for t in ts:
        t.start()
    while os.splice(a.fileno(), w2, 1 << 20):   # fabric socket a -> pipe
        pass
    os.close(w2)
    for t in ts:
        t.join()
    assert hashlib.sha256(out).digest() == hashlib.sha256(big).digest(), \
        (len(out), len(big))
    c.close(); a.close()
    print("ok splice: pipe<->socket, EAGAIN, EINVAL/ESPIPE, 8 MB checksummed, EOF")


# ------------------------------------------------------------- options

def tv(sec):
    return struct.pack("ll", int(sec), int((sec % 1) * 1e6))


def case_timeo():
    c, a = pair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv(0.3))
    t0 = time.monotonic()
    try:
        a.recv(10)
        raise AssertionError("recv returned")
    except BlockingIOError:
        pass
    dt = time.monotonic() - t0
    assert 0.25 <= dt < 3, dt
    # MSG_WAITALL with a timeout: what came, after the timeout
    c.sendall(b"abc")
    t0 = time.monotonic()
    got = a.recv(10, socket.MSG_WAITALL)
    dt = time.monotonic() - t0
    assert got == b"abc" and 0.25 <= dt < 3, (got, dt)
    # SO_SNDTIMEO: a full buffer gives a partial count, then EAGAIN
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv(0.3))
    chunk, total = bytes(range(256)) * 256, 0
    t0 = time.monotonic()
    while True:
        try:
            total += c.send(chunk)
        except BlockingIOError:
            break
        assert time.monotonic() - t0 < 30, "send never timed out"
    dt = time.monotonic() - t0
    assert dt >= 0.25, dt
    drain(a, total)
    c.close(); a.close()
    print("ok timeo: SO_RCVTIMEO (EAGAIN, MSG_WAITALL partial), SO_SNDTIMEO")


def case_linger():
    # the peer does not read: close waits for the linger time
    c, a = pair()
    total = fill(c)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 1))
    t0 = time.monotonic()
    c.close()
    dt = time.monotonic() - t0
    assert 0.9 <= dt < 5, dt
    drain(a, total)
    assert a.recv(10) == b""
    a.close()
    # the peer reads: close returns once it has read everything
    c, a = pair()
    total = fill(c)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 20))
    go = threading.Event()
    got = []

    def reader():
        go.wait()
        got.append(recvn(a, total + 1))
    t = threading.Thread(target=reader)
    t.start()
    t0 = time.monotonic()
    go.set()
    c.close()
    dt = time.monotonic() - t0
    t.join()
    assert dt < 10 and len(got[0]) == total, (dt, len(got[0]), total)
    a.close()
    # linger 0: the peer's next read fails with ECONNRESET
    c, a = pair()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    # poll says so too: readable, error and hang-up (waits for the reset)
    p = select.poll()
    p.register(a, select.POLLIN)
    ev = p.poll(10000)
    want = select.POLLIN | select.POLLERR | select.POLLHUP
    assert ev and ev[0][1] & want == want, ("poll after a reset", ev)
    try:
        b = a.recv(10)
        raise AssertionError("recv after an abortive close: %r" % b)
    except ConnectionResetError:
        pass
    a.close()
    print("ok linger: close waits for the reader or the linger time; linger 0 resets")


# What kernel TCP answers, call by call, once the peer closed (FIN; our
# first send is accepted and answered with RST), shut down its writing
# (its end stays open), reset (SO_LINGER 0), or closed with our bytes
# unread (the kernel resets then too).  "r:" is a recv, the rest sends.
EPIPE_SEQS = {
    ("close", "send"): "ok EPIPE EPIPE EPIPE r:eof",
    ("close", "recv"): "r:eof ok EPIPE EPIPE EPIPE r:eof",
    ("shut_wr", "send"): "ok ok ok ok r:eof",
    ("shut_wr", "recv"): "r:eof ok ok ok ok r:eof",
    ("reset", "send"): "ECONNRESET EPIPE EPIPE EPIPE r:eof",
    ("reset", "recv"): "r:ECONNRESET EPIPE EPIPE EPIPE EPIPE r:eof",
    ("unread", "send"): "ECONNRESET EPIPE EPIPE EPIPE r:eof",
    ("unread", "recv"): "r:ECONNRESET EPIPE EPIPE EPIPE EPIPE r:eof",
}


def outcome(f):
    try:
        r = f()
        return "ok" if not isinstance(r, bytes) else "eof" if not r else "data"
    except OSError as e:
        return errno.errorcode[e.errno]


def case_epipe():
    for (how, first), want in EPIPE_SEQS.items():
        for side in "ca":
            c, a = pair()
            me, peer = (c, a) if side == "c" else (a, c)
            if how == "unread":
                me.sendall(b"zz")
            if how == "reset":
                peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                struct.pack("ii", 1, 0))
            if how == "shut_wr":
                peer.shutdown(socket.SHUT_WR)
            else:
                peer.close()
            # until the peer's FIN or RST is here (poll takes no error)
            p = select.poll()
            p.register(me, select.POLLIN | select.POLLRDHUP)
            assert p.poll(10000), (how, first, side, "no end of stream")
            seq = []
            if first == "recv":
                seq.append("r:" + outcome(lambda: me.recv(10)))
            for _ in range(4):
                seq.append(outcome(lambda: me.send(b"x" * 100)))
            seq.append("r:" + outcome(lambda: me.recv(10)))
            seq = " ".join(seq)
            print("seq", how, first, side, seq)
            assert seq == want, (how, first, side, seq, want)
            if how == "shut_wr":      # the peer's end stays open: it reads
                assert recvn(peer, 400) == b"x" * 400
                peer.close()
            me.close()
    print("ok epipe: send after the peer's close, shutdown and reset, as the kernel")


def outq(s):
    return struct.unpack("i", fcntl.ioctl(s, 0x5411, b"\0" * 4))[0]  # SIOCOUTQ


def case_outq():
    c, a = pair()
    assert outq(c) == 0
    total = fill(c)
    q = outq(c)
    assert 0 < q <= total, (q, total)
    drain(a, total)
    for _ in range(2000):             # bounded: the last ack may lag
        if outq(c) == 0:
            break
        time.sleep(0.005)
    assert outq(c) == 0, outq(c)
    c.close(); a.close()
    print("ok outq: SIOCOUTQ counts unread bytes (%d of %d), 0 once read" % (q, total))


# ------------------------------------------------------------- processes

def case_vfork():
    c, a = pair()
    # Python's subprocess uses vfork: the child's dup2 onto fd 1 and its
    # closes must not touch the parent's descriptors
    p = subprocess.run(["sh", "-c", "printf from-child"], stdout=c)
    assert p.returncode == 0
    p = subprocess.run(["sh", "-c", "printf ' and back' >&2"], stderr=a,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0
    sys.stdout.write("parent stdout intact\n")
    sys.stdout.flush()
    c.sendall(b"|parent")
    assert recvn(a, 17) == b"from-child|parent", "bytes after vfork"
    assert recvn(c, 9) == b" and back"
    a.sendall(b"more")
    assert recvn(c, 4) == b"more"
    if os.environ.get("NTBX_STAT"):      # still on the fabric
        st = subprocess.run([os.environ["NTBX_STAT"], "stat"],
                            capture_output=True, text=True).stdout
        assert any(":%d " % PORT in ln and " fabric" in ln
                   for ln in st.splitlines()), st
    c.close()
    assert a.recv(10) == b""
    a.close()
    print("ok vfork: children wrote on the fabric sockets, parent unchanged")


def case_epollex():
    c, a = pair()
    eps = [select.epoll(), select.epoll()]
    for ep in eps:
        ep.register(a.fileno(), select.EPOLLIN | select.EPOLLEXCLUSIVE)
    for bad in (lambda: eps[0].modify(a.fileno(), select.EPOLLIN),
                lambda: select.epoll().register(
                    c.fileno(), select.EPOLLIN | select.EPOLLEXCLUSIVE |
                    select.EPOLLRDHUP)):
        try:
            bad()
            raise AssertionError("EPOLLEXCLUSIVE misuse accepted")
        except OSError as e:
            assert e.errno == errno.EINVAL, e
    woke = []
    ready = threading.Barrier(3)

    def waiter(ep):
        ready.wait()
        woke.append(ep.poll(10))
    ts = [threading.Thread(target=waiter, args=(ep,)) for ep in eps]
    for t in ts:
        t.start()
    ready.wait()
    c.sendall(b"ping")
    for t in ts:
        t.join()
    hits = [ev for ev in woke if (a.fileno(), select.EPOLLIN) in ev]
    assert len(hits) >= 1, woke
    assert recvn(a, 4) == b"ping"
    c.close(); a.close()
    print("ok epollex: EPOLLEXCLUSIVE accepted, %d of 2 waiters woke, "
          "MOD and bad bits EINVAL" % len(hits))


def case_epollfork():
    c, a = pair()
    ep = select.epoll()
    ep.register(a.fileno(), select.EPOLLIN)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = 1
        try:
            os.write(w, b"r")
            ev = ep.poll(10)
            ok = 0 if (a.fileno(), select.EPOLLIN) in ev else 2
            if not ok:
                b = a.recv(100)
                a.sendall(b"child got " + b)
                ev = ep.poll(10)          # end of stream
                ok = 0 if ev and a.recv(10) == b"" else 3
                a.close(); c.close()      # the parent's close is the last
        finally:
            os._exit(ok)
    os.read(r, 1)
    c.sendall(b"hi")
    assert recvn(c, 12) == b"child got hi"
    c.shutdown(socket.SHUT_WR)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st
    c.close(); a.close()
    print("ok epollfork: the child waits on the inherited epoll set")


def case_epollmix():
    """A kernel descriptor's event is not starved by a fabric socket that
    stays ready: epoll_wait returns the fabric's events without asking the
    kernel set at every call (epoll.c, SPIN_KERNEL_NS), so this checks
    that it still asks."""
    c, a = pair()
    c.sendall(b"unread")                  # a stays readable (level)
    r, w = os.pipe()
    ep = select.epoll()
    ep.register(a.fileno(), select.EPOLLIN)
    ep.register(r, select.EPOLLIN)
    for _ in range(2000):                 # a busy loop on the fabric alone
        assert ep.poll(1) == [(a.fileno(), select.EPOLLIN)]
    os.write(w, b"p")
    t0, calls = time.monotonic(), 0
    while True:
        ev = dict(ep.poll(1))
        calls += 1
        assert ev.get(a.fileno()) == select.EPOLLIN, ev
        if r in ev:
            break
        assert time.monotonic() - t0 < 1.0, \
            "the pipe was not reported in 1 s (%d calls)" % calls
    assert recvn(a, 6) == b"unread"
    os.read(r, 1)
    assert ep.poll(0) == []
    c.close(); a.close(); os.close(r); os.close(w)
    print("ok epollmix: a pipe's event among a ready fabric socket's, "
          "reported within 1 s")


def kernel_cork(fd):
    """TCP_CORK as the kernel has it, asked by a program that runs without
    the preload and shares the socket (fork and exec)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run(
        [sys.executable, "-c",
         "import socket, sys; s = socket.socket(fileno=int(sys.argv[1]));"
         "print(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK));"
         "s.detach()", str(fd)],
        pass_fds=(fd,), env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def case_cork():
    """TCP_CORK set and cleared around each response, as nginx's
    tcp_nopush does: a fabric connection keeps the value without asking
    the kernel at every set (sockopt.c), yet getsockopt, its syscall()
    form and a program the process starts all see what was set last."""
    SYS_getsockopt = 55                   # x86-64
    c, a = pair()
    v = ctypes.c_int(-1)
    ln = ctypes.c_int(4)
    for i, want in enumerate([1, 0, 1, 0, 1, 1, 0] * 30):
        a.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, want)
        assert a.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == want
        a.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, want * 7)
        ln.value = 4
        assert libc.syscall(SYS_getsockopt, a.fileno(), socket.IPPROTO_TCP,
                            socket.TCP_CORK, ctypes.byref(v),
                            ctypes.byref(ln)) == 0
        assert v.value == want, (i, v.value, want)
        a.sendall(b"r%03d" % i)           # a response, corked or not
        assert recvn(c, 4) == b"r%03d" % i
    for want in (1, 0):
        # set last without a getsockopt after it: the child must see it
        a.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1 - want)
        a.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, want)
        assert kernel_cork(a.fileno()) == want, want
    c.sendall(b"end")
    assert recvn(a, 3) == b"end"
    c.close(); a.close()
    print("ok cork: 210 sets each way read back by getsockopt, syscall() "
          "and a program without the preload")


# ------------------------------------------------------------- addresses

def case_ipv6():
    out = []
    for name, fam, lhost, chost, cfam in (
            ("::1", socket.AF_INET6, "::1", None, None),
            ("v4 client to ::", socket.AF_INET6, "::", "127.0.0.1",
             socket.AF_INET),
            ("::ffff:127.0.0.1", socket.AF_INET6, "::", "::ffff:127.0.0.1",
             None)):
        c, a = pair(fam, lhost, chost, cfam)
        data = os.urandom(3 << 20)
        t = threading.Thread(target=c.sendall, args=(data,))
        t.start()
        assert recvn(a, len(data)) == data
        t.join()
        a.sendall(b"back")
        assert recvn(c, 4) == b"back"
        v4 = lambda n: (n[0].replace("::ffff:", ""), n[1])
        assert v4(c.getpeername()) == v4(a.getsockname()), name
        assert v4(a.getpeername()) == v4(c.getsockname()), name
        c.close()
        assert a.recv(1) == b""
        a.close()
        out.append(name)
    print("ok ipv6:", ", ".join(out))


# ------------------------------------------------------------- asyncio

async def aio_main():
    async def handle(r, w):
        while True:
            b = await r.read(65536)
            if not b:
                break
            w.write(b)
            await w.drain()
        w.write(b"bye")
        await w.drain()
        w.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", PORT)

    async def client(size):
        r, w = await asyncio.open_connection("127.0.0.1", PORT)
        data = os.urandom(size)

        async def send():
            w.write(data)
            await w.drain()
            w.write_eof()                    # half-close
        t = asyncio.ensure_future(send())
        got = await r.read(-1)               # until the server closes
        await t
        w.close()
        assert got == data + b"bye", (size, len(got))

    await asyncio.gather(*(client(n) for n in (1, 1000, 100000, 4 << 20,
                                                *[7777] * 16)))
    # a timeout on an idle connection, then it still works
    r, w = await asyncio.open_connection("127.0.0.1", PORT)
    try:
        await asyncio.wait_for(r.read(10), 0.2)
        raise AssertionError("read returned")
    except asyncio.TimeoutError:
        pass
    w.write(b"late")
    w.write_eof()
    assert await r.read(-1) == b"latebye"
    w.close()
    srv.close()
    await srv.wait_closed()


def case_asyncio():
    asyncio.run(aio_main())
    print("ok asyncio: 21 clients (1 B to 4 MB, half-close), timeout")


globals()["case_" + sys.argv[1]]()
