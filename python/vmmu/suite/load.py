"""Load generators for the suite's servers. Each runs in the suite's own process — outside the
recording — talks to the recorded server through ``port``, draws every request from
``random.Random(seed)``, and ends by asking the server to shut down (which ends the recording).
A server entry names its generator (:attr:`vmmu.suite.entries.Server.load`); it is called with
the port and the scale's parameters its signature names.
"""

from __future__ import annotations

import bisect
import random
import socket
import time
from itertools import accumulate

#: Requests sent before their replies are read (redis-benchmark's ``-P``).
PIPELINE = 32


def wait_for_port(port: int, timeout: float, alive) -> socket.socket:
    """A connection to ``127.0.0.1:port`` once the server listens; ``alive()`` false (the
    server exited) or ``timeout`` seconds without a listener raise :class:`RuntimeError`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=600)
        except OSError:
            if not alive():
                raise RuntimeError("the server exited before it listened") from None
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the server did not listen on port {port} within {timeout:.0f} s"
                ) from None
            time.sleep(0.2)


def _resp(*args: bytes) -> bytes:
    """One request in Redis's protocol (RESP): an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class _Replies:
    """Reads and counts RESP replies from a socket, raising on an error reply."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            data = self.sock.recv(1 << 20)
            if not data:
                raise RuntimeError("the server closed the connection")
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _skip(self, n: int) -> None:
        while len(self.buf) < n:
            data = self.sock.recv(1 << 20)
            if not data:
                raise RuntimeError("the server closed the connection")
            self.buf += data
        self.buf = self.buf[n:]

    def read(self, count: int) -> None:
        for _ in range(count):
            line = self._line()
            kind = line[:1]
            if kind == b"-":
                raise RuntimeError(f"the server replied {line[1:].decode(errors='replace')}")
            if kind == b"$" and int(line[1:]) >= 0:
                self._skip(int(line[1:]) + 2)


def _zipf_table(n: int, alpha: float) -> list[float]:
    """Cumulative weights of ranks 1..n under Zipf's law with exponent ``alpha``."""
    return list(accumulate(1.0 / (k**alpha) for k in range(1, n + 1)))


def redis_kv(port: int, keys: int, value: int, ops: int, seed: int, alive) -> dict:
    """Writes ``keys`` values of ``value`` bytes (MSET, 100 keys a request), then ``ops``
    requests, 90% GET and 10% SET, on keys drawn by a Zipf law (alpha 0.99, YCSB's skew) over
    a seeded permutation of the keys, ``PIPELINE`` at a time; then ``SHUTDOWN NOSAVE``."""
    rng = random.Random(seed)
    sock = wait_for_port(port, 600, alive)
    replies = _Replies(sock)
    payload = bytes(rng.randrange(33, 127) for _ in range(4096))
    inflight = 0

    def send(req: bytes) -> None:
        nonlocal inflight
        sock.sendall(req)
        inflight += 1
        if inflight >= PIPELINE:
            replies.read(inflight)
            inflight = 0

    def val(k: int) -> bytes:
        off = (k * 2654435761) % (len(payload) - value) if value < len(payload) else 0
        return payload[off : off + value]

    for start in range(0, keys, 100):
        args = []
        for k in range(start, min(keys, start + 100)):
            args += [b"key:%d" % k, val(k)]
        send(_resp(b"MSET", *args))
    order = list(range(keys))
    rng.shuffle(order)
    cum = _zipf_table(keys, 0.99)
    gets = sets = 0
    for _ in range(ops):
        k = order[bisect.bisect_left(cum, rng.random() * cum[-1])]
        if rng.random() < 0.9:
            send(_resp(b"GET", b"key:%d" % k))
            gets += 1
        else:
            send(_resp(b"SET", b"key:%d" % k, val(k ^ 1)))
            sets += 1
    replies.read(inflight)
    sock.sendall(_resp(b"SHUTDOWN", b"NOSAVE"))
    sock.close()
    return {"requests": keys // 100 + ops + 1, "gets": gets, "sets": sets}
