"""_aio_http.py -- the asyncio client's HTTP/1.1: as _http.py for the blocking client (a
pool of keep-alive connections, TLS, one deadline for all of a call: asyncio.wait_for
around the name lookup, connect, TLS, send and receive), and the duplex hold's
connection, never pooled."""
from __future__ import annotations

import asyncio
import ssl
import time
from typing import List, Optional, Tuple

from . import _proto
from ._proto import Call, Endpoint, Head
from .errors import ProtocolError, Unreachable


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0
        self.used = 0

    def stale(self) -> bool:
        return self.reader.at_eof() or self.writer.is_closing() or bool(
            getattr(self.reader, "_buffer", b""))

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:   # closing a transport of a loop already closed
            pass

    async def read_head(self) -> Head:
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            raise EOFError(len(e.partial)) from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("an answer header longer than %d bytes"
                                % _proto.MAX_HEAD) from None
        return _proto.parse_head(raw[:-4])

    async def read_body(self, head: Head, method: str) -> Tuple[bytes, bool]:
        frame, n = _proto.framing(head, method)
        r = self.reader
        try:
            if frame == "none":
                body = b""
            elif frame == "length":
                body = await r.readexactly(n)
            elif frame == "chunked":
                parts = []
                while True:
                    size = _proto.parse_chunk_size(await r.readuntil(b"\r\n"))
                    if size == 0:
                        while (await r.readuntil(b"\r\n")) != b"\r\n":
                            pass
                        break
                    parts.append(await r.readexactly(size))
                    await r.readexactly(2)
                body = b"".join(parts)
            else:       # to the end of the connection
                parts, size = [], 0
                while size <= _proto.MAX_BODY:
                    chunk = await r.read(65536)
                    if not chunk:
                        break
                    parts.append(chunk)
                    size += len(chunk)
                body = b"".join(parts)
        except asyncio.IncompleteReadError:
            raise EOFError(1) from None
        return body, _proto.reusable(head, frame)


class AsyncTransport:
    """The connections of one AsyncClient: as the blocking Transport (a pool of
    keep-alive connections, TLS), for one event loop."""

    def __init__(self, ep: Endpoint, token: Optional[str],
                 ssl_context: Optional[ssl.SSLContext], pool_size: int, idle_timeout: float):
        self.ep = ep
        self.token = token
        self.ssl_context = ssl_context or (ssl.create_default_context() if ep.https else None)
        self.pool_size = pool_size
        self.idle_timeout = idle_timeout
        self._idle: List[Conn] = []
        self.connects = 0

    async def connect(self) -> Conn:
        ctx = self.ssl_context
        reader, writer = await asyncio.open_connection(
            self.ep.host, self.ep.port, ssl=ctx,
            server_hostname=self.ep.host if ctx is not None else None,
            limit=_proto.MAX_HEAD + 1024)
        self.connects += 1
        return Conn(reader, writer)

    async def _checkout(self) -> Conn:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < self.idle_timeout and not conn.stale():
                return conn
            conn.close()
        return await self.connect()

    def _checkin(self, conn: Conn) -> None:
        conn.idle_since = time.monotonic()
        if len(self._idle) < self.pool_size:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:   # at interpreter exit, or its loop closed
            pass

    def _describe(self, call: Call) -> str:
        return "%s %s" % (call.method, self.ep.url + call.path)

    async def exchange(self, call: Call, deadline: float) -> Tuple[int, bytes, float]:
        try:
            return await asyncio.wait_for(self._exchange(call),
                                          max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise Unreachable("%s: no answer within the call's deadline"
                              % self._describe(call)) from None

    async def _exchange(self, call: Call) -> Tuple[int, bytes, float]:
        data = _proto.request_bytes(self.ep, self.token, call.method,
                                    call.target(self.ep.base), call.payload())
        for attempt in (1, 2):
            conn: Optional[Conn] = None
            try:
                conn = await self._checkout()
                reused = conn.used > 0
                sent = time.monotonic()
                conn.writer.write(data)
                await conn.writer.drain()
                head = await conn.read_head()
                body, again = await conn.read_body(head, call.method)
                conn.used += 1
                if again:
                    self._checkin(conn)
                else:
                    conn.close()
                return head.status, body, sent
            except (EOFError, OSError) as e:
                if conn is not None:
                    conn.close()
                nothing = isinstance(e, EOFError) and e.args == (0,) or \
                    isinstance(e, (ConnectionResetError, BrokenPipeError))
                if attempt == 1 and conn is not None and reused and nothing and call.replay:
                    continue
                what = "the connection closed" if isinstance(e, EOFError) else (
                    str(e) or type(e).__name__)
                raise Unreachable("%s: %s" % (self._describe(call), what)) from None
            except BaseException:   # a ProtocolError, or cancelled by the deadline
                if conn is not None:
                    conn.close()
                raise
        raise AssertionError("unreachable")

    async def open_duplex(self, call: Call, deadline: float
                          ) -> Tuple[Head, bytes, float, Optional[Conn], bytes]:
        """A duplex hold's acquire on a new connection: (head, body, send time, the
        connection if it switched (101), else None, the grant line)."""
        try:
            return await asyncio.wait_for(self._open_duplex(call),
                                          max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise Unreachable("%s: no answer within the call's deadline"
                              % self._describe(call)) from None

    async def _open_duplex(self, call: Call
                           ) -> Tuple[Head, bytes, float, Optional[Conn], bytes]:
        data = _proto.request_bytes(self.ep, self.token, call.method,
                                    call.target(self.ep.base), call.payload(), upgrade=True)
        conn: Optional[Conn] = None
        try:
            conn = await self.connect()
            sent = time.monotonic()
            conn.writer.write(data)
            await conn.writer.drain()
            head = await conn.read_head()
            if head.status == 101:
                if "redlock-hold" not in head.tokens("upgrade"):
                    raise ProtocolError("101 without Upgrade: redlock-hold", status=101)
                try:
                    line = await conn.reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    raise EOFError(0) from None
                return head, b"", sent, conn, line
            if head.status // 100 == 2:
                # Granted without switching (a one-way stream of a service without duplex
                # holds): its body never ends; closing the connection releases the lock.
                conn.close()
                return head, b"", sent, None, b""
            body, _ = await conn.read_body(head, call.method)
            conn.close()
            return head, body, sent, None, b""
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
