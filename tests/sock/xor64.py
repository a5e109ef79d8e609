"""tests/sock/xor64.py — the 64-byte exchange of the fork tests
(forkserve.py, forkclient.py, forkident.py): a client sends 64 bytes and
the server answers each byte XOR 0x5A."""
import socket

SIZE = 64


def request(i):
    return bytes((i + k) & 0xFF for k in range(SIZE))


def answer(req):
    return bytes(b ^ 0x5A for b in req)


def recv_exact(s, n):
    """Up to @n bytes: fewer only if the peer ended the stream."""
    got = b""
    while len(got) < n:
        part = s.recv(n - len(got))
        if not part:
            break
        got += part
    return got


def exchange(port, i):
    """One connection to 127.0.0.1:@port with request(@i): the answer."""
    req = request(i)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(req)
        return recv_exact(s, SIZE)


def serve_conn(conn):
    """Answer one request on @conn; False if it ended short."""
    req = recv_exact(conn, SIZE)
    if len(req) < SIZE:
        return False
    conn.sendall(answer(req))
    return True
