"""_http.py -- the blocking client's HTTP/1.1: a pool of keep-alive connections, TLS,
and a whole-call deadline on every call: the name lookup, connect, TLS handshake, send
and every read of one call share one deadline (a reply that trickles in a byte at a time
cannot stretch it, as a per-read timeout would).  Also the duplex streamed hold's
connection (DuplexChannel), which is never pooled."""
from __future__ import annotations

import concurrent.futures
import select
import socket
import ssl
import threading
import time
from typing import List, Optional, Tuple

from . import _proto
from ._proto import Call, Endpoint, Head
from .errors import ProtocolError, Unreachable

# Name lookups run here, so that a call's deadline bounds them (getaddrinfo has no
# timeout of its own).  A lookup that outlives its call finishes in the background.
_RESOLVER = concurrent.futures.ThreadPoolExecutor(max_workers=4,
                                                  thread_name_prefix="redlockd-resolve")


class _Timeout(Exception):
    pass


class Connection:
    """One socket (plain or TLS) and the bytes read from it but not yet used."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.idle_since = 0.0
        self.used = 0           # requests answered on it

    def _settimeout(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Timeout()
        self.sock.settimeout(left)

    def send(self, data: bytes, deadline: float) -> None:
        # sendall's timeout bounds the whole send (Python 3.5+), TLS included.
        self._settimeout(deadline)
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise _Timeout() from None

    def fill(self, deadline: float) -> bool:
        """Read what comes (at least a byte) before the deadline; False at the end."""
        self._settimeout(deadline)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise _Timeout() from None
        if not data:
            return False
        self.buf += data
        return True

    def read_until(self, delim: bytes, deadline: float, limit: int) -> bytes:
        start = 0
        while True:
            i = self.buf.find(delim, start)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + len(delim)]
                return out
            if len(self.buf) > limit:
                raise ProtocolError("an answer line longer than %d bytes" % limit)
            start = max(0, len(self.buf) - len(delim) + 1)
            if not self.fill(deadline):
                raise EOFError(len(self.buf))

    def read_exact(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n:
            if not self.fill(deadline):
                raise EOFError(len(self.buf))
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_to_end(self, deadline: float) -> bytes:
        while len(self.buf) <= _proto.MAX_BODY and self.fill(deadline):
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def read_body(self, head: Head, method: str, deadline: float) -> Tuple[bytes, bool]:
        """The body, and whether the connection may be used again."""
        frame, n = _proto.framing(head, method)
        if frame == "none":
            body = b""
        elif frame == "length":
            body = self.read_exact(n, deadline)
        elif frame == "chunked":
            parts = []
            while True:
                size = _proto.parse_chunk_size(self.read_until(b"\r\n", deadline, 1024))
                if size == 0:
                    while self.read_until(b"\r\n", deadline, 8192):   # trailers
                        pass
                    break
                parts.append(self.read_exact(size, deadline))
                self.read_until(b"\r\n", deadline, 2)
            body = b"".join(parts)
        else:
            body = self.read_to_end(deadline)
        return body, _proto.reusable(head, frame) and not self.buf

    def stale(self) -> bool:
        """An idle connection the service closed (or wrote to): not to be used."""
        try:
            if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
                return True
            r, _, _ = select.select([self.sock], [], [], 0)
            return bool(r)
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Transport:
    """The connections of one Client to one service: new ones made within a call's
    deadline, idle ones kept (at most pool_size, each at most idle_timeout seconds:
    less than the service's keep-alive limit, --header-timeout-ms, 15 s by default)."""

    def __init__(self, ep: Endpoint, token: Optional[str],
                 ssl_context: Optional[ssl.SSLContext], pool_size: int, idle_timeout: float):
        self.ep = ep
        self.token = token
        # Made once (loading the system's CA certificates takes a while), not per connection.
        self.ssl_context = ssl_context or (ssl.create_default_context() if ep.https else None)
        self.pool_size = pool_size
        self.idle_timeout = idle_timeout
        self._idle: List[Connection] = []
        self._mu = threading.Lock()
        self.connects = 0       # connections made (the tests count them)

    # -- connections ------------------------------------------------------------------------
    def _addresses(self, deadline: float) -> list:
        flags = socket.AI_NUMERICHOST if self.ep.literal else 0
        if self.ep.literal:
            return socket.getaddrinfo(self.ep.host, self.ep.port, 0, socket.SOCK_STREAM,
                                      0, flags)
        fut = _RESOLVER.submit(socket.getaddrinfo, self.ep.host, self.ep.port, 0,
                               socket.SOCK_STREAM)
        try:
            return fut.result(timeout=max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            raise _Timeout() from None

    def connect(self, deadline: float) -> Connection:
        err: Optional[BaseException] = None
        for family, kind, proto, _, addr in self._addresses(deadline):
            sock = socket.socket(family, kind, proto)
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Timeout()
                sock.settimeout(left)
                sock.connect(addr)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.ep.https:
                    ctx = self.ssl_context
                    assert ctx is not None
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise _Timeout()
                    sock.settimeout(left)    # the handshake's whole duration (CPython)
                    sock = ctx.wrap_socket(sock, server_hostname=self.ep.host)
                self.connects += 1
                return Connection(sock)
            except socket.timeout:
                sock.close()
                raise _Timeout() from None
            except _Timeout:
                sock.close()
                raise
            except OSError as e:
                sock.close()
                err = e
        raise err if err is not None else OSError("no address for %s" % self.ep.host)

    def _checkout(self, deadline: float) -> Connection:
        now = time.monotonic()
        while True:
            with self._mu:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self.connect(deadline)
            if now - conn.idle_since < self.idle_timeout and not conn.stale():
                return conn
            conn.close()

    def _checkin(self, conn: Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._mu:
            if len(self._idle) < self.pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._mu:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:   # at interpreter exit
            pass

    # -- calls ------------------------------------------------------------------------------
    def _describe(self, call: Call) -> str:
        return "%s %s" % (call.method, self.ep.url + call.path)

    def exchange(self, call: Call, deadline: float) -> Tuple[int, bytes, float]:
        """Send the call and read its answer, all before the deadline: (status, body,
        the time.monotonic() just before the request was sent).  Unreachable when no
        answer came."""
        data = _proto.request_bytes(self.ep, self.token, call.method,
                                    call.target(self.ep.base), call.payload())
        for attempt in (1, 2):
            conn: Optional[Connection] = None
            try:
                conn = self._checkout(deadline)
                reused = conn.used > 0
                sent = time.monotonic()
                conn.send(data, deadline)
                head = _proto.parse_head(
                    conn.read_until(b"\r\n\r\n", deadline, _proto.MAX_HEAD))
                body, again = conn.read_body(head, call.method, deadline)
                conn.used += 1
                if again:
                    self._checkin(conn)
                else:
                    conn.close()
                return head.status, body, sent
            except _Timeout:
                if conn is not None:
                    conn.close()
                raise Unreachable("%s: no answer within the call's deadline"
                                  % self._describe(call)) from None
            except (EOFError, OSError) as e:
                if conn is not None:
                    conn.close()
                # A pooled connection the service closed just as we used it: once more on
                # a new one, if nothing of an answer came and the call may be repeated.
                nothing = isinstance(e, EOFError) and e.args == (0,) or \
                    isinstance(e, (ConnectionResetError, BrokenPipeError))
                if attempt == 1 and conn is not None and reused and nothing and call.replay:
                    continue
                what = "the connection closed" if isinstance(e, EOFError) else (
                    str(e) or type(e).__name__)
                raise Unreachable("%s: %s" % (self._describe(call), what)) from None
            except ProtocolError:
                if conn is not None:
                    conn.close()
                raise
        raise AssertionError("unreachable")

    def open_duplex(self, call: Call, deadline: float
                    ) -> Tuple[Head, bytes, float, Optional[Connection]]:
        """Send a duplex hold's acquire (with Upgrade) on a new connection: (the answer's
        head, its body, the time just before the send, the connection if it switched to
        the hold's lines (101), else None)."""
        data = _proto.request_bytes(self.ep, self.token, call.method,
                                    call.target(self.ep.base), call.payload(), upgrade=True)
        conn: Optional[Connection] = None
        try:
            conn = self.connect(deadline)
            sent = time.monotonic()
            conn.send(data, deadline)
            head = _proto.parse_head(conn.read_until(b"\r\n\r\n", deadline, _proto.MAX_HEAD))
            if head.status == 101:
                if "redlock-hold" not in head.tokens("upgrade"):
                    raise ProtocolError("101 without Upgrade: redlock-hold", status=101)
                return head, b"", sent, conn
            if head.status // 100 == 2:
                # Granted without switching (a one-way stream of a service without duplex
                # holds): its body never ends; closing the connection releases the lock.
                conn.close()
                return head, b"", sent, None
            body, _ = conn.read_body(head, call.method, deadline)
            conn.close()
            return head, body, sent, None
        except _Timeout:
            if conn is not None:
                conn.close()
            raise Unreachable("%s: no answer within the call's deadline"
                              % self._describe(call)) from None
        except (EOFError, OSError) as e:
            if conn is not None:
                conn.close()
            what = "the connection closed" if isinstance(e, EOFError) else (
                str(e) or type(e).__name__)
            raise Unreachable("%s: %s" % (self._describe(call), what)) from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    @staticmethod
    def read_line(conn: Connection, deadline: float) -> bytes:
        """A line of a duplex hold, before the deadline (the grant)."""
        try:
            return conn.read_until(b"\n", deadline, _proto.MAX_LINE)
        except _Timeout:
            raise Unreachable("no grant line within the call's deadline") from None
        except (EOFError, OSError) as e:
            raise Unreachable("the hold's connection ended before its grant: %s"
                              % (e if not isinstance(e, EOFError) else "closed")) from None


class DuplexChannel:
    """The connection of a duplex hold, for the one thread that reads and writes it, with
    a wake-up that another thread may call (to say: release, or the belief ended)."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)

    def wake(self) -> None:
        try:
            self._w.send(b"x")
        except OSError:
            pass

    def send(self, data: bytes, deadline: float) -> None:
        """Raises OSError (or TimeoutError when the deadline passes first)."""
        try:
            self.conn.send(data, deadline)
        except _Timeout:
            raise TimeoutError("a write to the hold's connection took too long") from None

    def read_line(self, until: float) -> Optional[bytes]:
        """The next line; None when woken or when `until` came first.  EOFError at the
        connection's end; OSError on its failure."""
        conn = self.conn
        while True:
            i = conn.buf.find(b"\n")
            if i >= 0:
                line = bytes(conn.buf[:i])
                del conn.buf[:i + 1]
                return line.rstrip(b"\r")
            if len(conn.buf) > _proto.MAX_LINE:
                raise ProtocolError("a hold line longer than %d bytes" % _proto.MAX_LINE)
            left = until - time.monotonic()
            if left <= 0:
                return None
            sock = conn.sock
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                r, _, _ = select.select([sock, self._r], [], [], left)
                if self._r in r:
                    try:
                        while self._r.recv(64):
                            pass
                    except OSError:
                        pass
                    return None
                if sock not in r:
                    return None
            try:
                if not conn.fill(max(until, time.monotonic() + 0.001)):
                    raise EOFError()
            except _Timeout:
                return None     # a partial TLS record: more comes, or `until` passes

    def close(self) -> None:
        self.conn.close()
        for s in (self._r, self._w):
            try:
                s.close()
            except OSError:
                pass
