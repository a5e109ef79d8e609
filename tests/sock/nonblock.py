"""O_NONBLOCK on fabric sockets follows the open file description, as on the
kernel: changed by fcntl(F_SETFL) or ioctl(FIONBIO), in this process or in a
forked child that shares the description.  (libntbx-preload keeps the flag in
the connection's shared record so that reads need no fcntl system call; this
checks that the record never goes stale.)  Run under `ntbx run`; prints
"ok nonblock" and exits 0 when every check passes."""
import fcntl, os, socket, struct, sys, termios, threading

port = int(sys.argv[1])
fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails.append(what)


def would_block(s):
    try:
        s.recv(16)
    except BlockingIOError:
        return True
    return False


def kernel_nonblock(s):
    return bool(fcntl.fcntl(s.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK)


lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", port))
lst.listen(4)
c = socket.create_connection(("127.0.0.1", port))
a, _ = lst.accept()
# traffic both ways first, so the connection is on the fabric and each side
# has read once in blocking mode (the flag is then known and kept)
c.sendall(b"x")
check(a.recv(1) == b"x", "blocking read on the acceptor")
a.sendall(b"y")
check(c.recv(1) == b"y", "blocking read on the connector")

# 1. this process, fcntl(F_SETFL)
a.setblocking(False)
check(would_block(a), "F_SETFL O_NONBLOCK: empty read gives EAGAIN")
a.setblocking(True)
c.sendall(b"1")
check(a.recv(1) == b"1" and not kernel_nonblock(a), "F_SETFL back to blocking")

# 2. ioctl(FIONBIO), both ways
fcntl.ioctl(a.fileno(), termios.FIONBIO, struct.pack("i", 1))
check(would_block(a) and kernel_nonblock(a), "FIONBIO 1: empty read gives EAGAIN")
fcntl.ioctl(a.fileno(), termios.FIONBIO, struct.pack("i", 0))
check(not kernel_nonblock(a), "FIONBIO 0: blocking again")

# 3. a forked child makes the shared description nonblocking
pid = os.fork()
if pid == 0:
    fl = fcntl.fcntl(a.fileno(), fcntl.F_GETFL)
    fcntl.fcntl(a.fileno(), fcntl.F_SETFL, fl | os.O_NONBLOCK)
    os._exit(0)
os.waitpid(pid, 0)
check(would_block(a), "child set O_NONBLOCK: the parent's empty read gives EAGAIN")

# 4. ... and blocking again: the parent's read must wait for data, not fail
pid = os.fork()
if pid == 0:
    fl = fcntl.fcntl(a.fileno(), fcntl.F_GETFL)
    fcntl.fcntl(a.fileno(), fcntl.F_SETFL, fl & ~os.O_NONBLOCK)
    os._exit(0)
os.waitpid(pid, 0)
got = []


def reader():
    try:
        got.append(a.recv(1))
    except BlockingIOError:
        got.append("EAGAIN")


t = threading.Thread(target=reader)
t.start()
c.sendall(b"2")
t.join(30)
check(got == [b"2"], "child cleared O_NONBLOCK: the parent's read waits (got %r)" % got)

for s in (a, c, lst):
    s.close()
if fails:
    sys.exit(1)
print("ok nonblock")
