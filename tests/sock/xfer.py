# tests/sock/xfer.py — a SHA-256-checked stream, for sock_dma, sock_ofi and
# ipof_two: `recv ADDR PORT` accepts one connection, reads to end of stream,
# answers one byte and prints the count and digest; `send ADDR PORT MB
# [PACE_MS]` sends MB MiB of blocks that differ each time (PACE_MS: sleep
# that long every MiB, so a test can act mid-stream), waits for the byte and
# prints the same.  Both lines equal: every byte arrived once, in order.
import hashlib, socket, sys, time
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def block(i):   # 128 KiB, different each time
    return hashlib.sha256(i.to_bytes(8, "little")).digest() * 4096
if mode == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1)
    c, _ = s.accept()
    h, n = hashlib.sha256(), 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        h.update(b); n += len(b)
    c.sendall(b"k"); c.close()
else:
    mb = int(sys.argv[4]); pace = float(sys.argv[5]) / 1000 if len(sys.argv) > 5 else 0
    c = socket.create_connection((addr, port))
    h, n = hashlib.sha256(), 0
    for i in range(mb * 8):
        b = block(i)
        c.sendall(b); h.update(b); n += len(b)
        if pace and i % 8 == 7: time.sleep(pace)
    c.shutdown(socket.SHUT_WR)
    if c.recv(1) != b"k": sys.exit("no answer")
    c.close()
print(n, h.hexdigest())
