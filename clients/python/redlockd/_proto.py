"""_proto.py -- the API without I/O, shared by the blocking client (client.py, lock.py)
and the asyncio one (aio.py): the service's address, durations, each operation's request
(a Call) and how its answer is read, HTTP/1.1 framing, and the lines of a duplex streamed
hold (docs/DESIGN.md section 10)."""
from __future__ import annotations

import datetime
import ipaddress
import json
import math
import os
import secrets
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from . import models
from ._version import __version__
from .errors import ProtocolError, error_from_reply

DEFAULT_URL = "http://127.0.0.1:8080"
USER_AGENT = "redlockd-python/" + __version__
MAX_HEAD = 64 * 1024          # an answer's header larger than this is not the service's
MAX_BODY = 16 * 1024 * 1024   # nor a body larger than this (a listing is at most ~300 KiB)
MAX_LINE = 64 * 1024          # nor a duplex line longer than this

Seconds = Union[float, int, datetime.timedelta]


def new_lease() -> str:
    """A fresh lease: 192 bits from the OS CSPRNG, 32 URL-safe characters (the form the
    service itself generates).  The client chooses its leases so that an acquire whose
    answer was lost can be retried: the service answers a POST repeating the lease that
    holds the lock with the same grant."""
    return secrets.token_urlsafe(24)


# -- the service's address ----------------------------------------------------------------
@dataclass(frozen=True)
class Endpoint:
    url: str
    https: bool
    host: str
    port: int
    base: str           # a path prefix, "" for none
    host_header: str
    literal: bool       # host is an IP address: no name lookup

    @staticmethod
    def parse(url: Optional[str]) -> "Endpoint":
        url = url or os.environ.get("REDLOCK_URL") or DEFAULT_URL
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("url must be http://HOST[:PORT] or https://...: %r" % url)
        https = u.scheme == "https"
        try:
            port = u.port or (443 if https else 80)
        except ValueError:
            raise ValueError("url has a bad port: %r" % url) from None
        host = u.hostname
        try:
            ipaddress.ip_address(host)
            literal = True
        except ValueError:
            literal = False
        shown = "[%s]" % host if ":" in host else host
        if port != (443 if https else 80):
            shown += ":%d" % port
        return Endpoint(url=url.rstrip("/"), https=https, host=host, port=port,
                        base=u.path.rstrip("/"), host_header=shown, literal=literal)


# -- durations: seconds (float or timedelta) in the API, ms on the wire ---------------------
def seconds(value: Seconds, what: str) -> float:
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError("%s must be a number of seconds (or a timedelta): %r" % (what, value))
    if value < 0:
        raise ValueError("%s must not be negative: %r" % (what, value))
    return float(value)


def to_ms(value: Optional[Seconds], what: str) -> Optional[int]:
    """Seconds to the service's whole milliseconds (rounded; None stays None)."""
    if value is None:
        return None
    s = seconds(value, what)
    if math.isinf(s):
        raise ValueError("%s must be finite" % what)
    return int(round(s * 1000.0))


def loss_margin(ttl: float) -> float:
    """How long before the end of its validity a held lock is called lost when no new
    validity came: a tenth of the ttl, 10 ms..1 s (what the service's own streamed hold
    uses before it says `lost`), so that code watching `lost` has that long to stop."""
    return min(max(ttl / 10.0, 0.010), 1.0)


# -- the operations ------------------------------------------------------------------------
def _quote(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError("a %s name is a non-empty string" % what)
    return urllib.parse.quote(name, safe="")


def lock_path(name: str) -> str:
    return "/locks/" + _quote(name, "lock")


def sem_path(name: str) -> str:
    return "/semaphores/" + _quote(name, "semaphore")


def _ok(doc: Mapping[str, Any], sent: float) -> Mapping[str, Any]:
    return doc


@dataclass
class Call:
    """One request of the API and how to read its answer.  wait: seconds the service
    may hold the answer back (a wait_ms it was asked for), added to the call's deadline.
    replay: the request may be sent again on a new connection when a pooled one turns
    out closed before any answer (not a release: a reentrant lease would give back two
    holds).  accept: error statuses whose body is still the answer (readiness: 503)."""
    method: str
    path: str
    parse: Callable[[Mapping[str, Any], float], Any] = _ok
    body: Optional[Dict[str, Any]] = None
    query: Optional[Dict[str, Any]] = None
    wait: float = 0.0
    replay: bool = True
    accept: Tuple[int, ...] = ()
    text: bool = False              # the answer is text (metrics), not JSON

    def target(self, base: str) -> str:
        p = base + self.path
        q = {k: v for k, v in (self.query or {}).items() if v is not None}
        if q:
            p += "?" + urllib.parse.urlencode(q)
        return p

    def payload(self) -> Optional[bytes]:
        return None if self.body is None else json.dumps(self.body).encode()


def _acquire_body(ttl: Optional[Seconds], wait: Optional[Seconds], lease: Optional[str],
                  owner: Optional[str]) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if lease is not None:
        body["lease"] = lease
    if ttl is not None:
        body["ttl_ms"] = to_ms(ttl, "ttl")
    if wait is not None:
        body["wait_ms"] = to_ms(wait, "wait")
    if owner is not None:
        body["owner"] = owner
    return body


def acquire(name: str, ttl: Optional[Seconds], wait: Optional[Seconds], lease: Optional[str],
            owner: Optional[str] = None, shared: bool = False,
            reentrant: bool = False) -> Call:
    body = _acquire_body(ttl, wait, lease, owner)
    if shared:
        body["mode"] = "shared"
    if reentrant:
        body["reentrant"] = True
    # A reentrant acquire is never sent twice: each counts one more hold.
    return Call("POST", lock_path(name), models.grant, body,
                wait=seconds(wait or 0, "wait"), replay=not reentrant)


def acquire_permit(name: str, permits: int, ttl: Optional[Seconds],
                   wait: Optional[Seconds], lease: Optional[str],
                   owner: Optional[str] = None) -> Call:
    if not isinstance(permits, int) or isinstance(permits, bool):
        raise TypeError("permits must be an integer")
    body = _acquire_body(ttl, wait, lease, owner)
    body["permits"] = permits
    return Call("POST", sem_path(name), models.permit_grant, body,
                wait=seconds(wait or 0, "wait"))


def acquire_many(names: Iterable[str], ttl: Optional[Seconds], wait: Optional[Seconds],
                 lease: Optional[str], modes: Optional[Mapping[str, str]] = None) -> Call:
    names = list(names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError("names: one or more non-empty lock names")
    body = _acquire_body(ttl, wait, lease, None)
    body["names"] = names
    if modes:
        body["modes"] = dict(modes)
    return Call("POST", "/locks", models.multi_grant, body, wait=seconds(wait or 0, "wait"))


def extend(path: str, lease: str, ttl: Optional[Seconds]) -> Call:
    body: Dict[str, Any] = {"lease": _lease(lease)}
    if ttl is not None:
        body["ttl_ms"] = to_ms(ttl, "ttl")
    return Call("PATCH", path, models.extension, body)


def release(path: str, lease: str, parse: Callable[..., Any] = models.released) -> Call:
    return Call("DELETE", path, parse, {"lease": _lease(lease)}, replay=False)


def force_release(name: str) -> Call:
    return Call("DELETE", lock_path(name), models.released, query={"force": "true"})


def release_many(lease: str) -> Call:
    return Call("DELETE", "/locks", models.multi_released, {"lease": _lease(lease)},
                replay=False)


def status(name: str, lease: Optional[str] = None, index: Optional[str] = None,
           wait: Optional[Seconds] = None) -> Call:
    if wait is not None and index is None:
        raise ValueError("a watch (wait) needs the index of an earlier status")
    return Call("GET", lock_path(name), models.status,
                query={"lease": lease, "index": index, "wait_ms": to_ms(wait, "wait")},
                wait=seconds(wait or 0, "wait"))


def semaphore_status(name: str) -> Call:
    return Call("GET", sem_path(name), models.semaphore_status)


def list_locks(prefix: str = "", limit: Optional[int] = None) -> Call:
    if not isinstance(prefix, str):
        raise TypeError("prefix must be a string")
    return Call("GET", "/locks", models.lock_list,
                query={"prefix": prefix or None, "limit": limit})


def health() -> Call:
    return Call("GET", "/healthz", models.health)


def readiness() -> Call:
    return Call("GET", "/readyz", models.health, accept=(503,))


def metrics() -> Call:
    return Call("GET", "/metrics", text=True)


def _lease(lease: Any) -> str:
    if not isinstance(lease, str) or not lease:
        raise ValueError("a lease is a non-empty string")
    return lease


# -- HTTP/1.1 --------------------------------------------------------------------------------
def request_bytes(ep: Endpoint, token: Optional[str], method: str, target: str,
                  payload: Optional[bytes], upgrade: bool = False) -> bytes:
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: " + ep.host_header,
             "User-Agent: " + USER_AGENT, "Accept: application/json"]
    if token:
        lines.append("Authorization: Bearer " + token)
    if upgrade:
        lines += ["Connection: Upgrade", "Upgrade: redlock-hold"]
    if payload is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(payload)]
    elif method in ("POST", "PATCH", "DELETE"):
        lines.append("Content-Length: 0")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (payload or b"")


@dataclass
class Head:
    version: str
    status: int
    reason: str
    headers: Dict[str, str]

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def tokens(self, name: str) -> List[str]:
        return [t.strip().lower() for t in self.header(name).split(",") if t.strip()]


def parse_head(raw: bytes) -> Head:
    """An answer's status line and header fields (raw: up to, without, the blank line)."""
    try:
        text = raw.decode("latin-1")
        lines = text.split("\r\n")
        version, status, *reason = lines[0].split(" ", 2)
        if not version.startswith("HTTP/1.") or len(status) != 3:
            raise ValueError(lines[0])
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(line)
            key = name.strip().lower()
            value = value.strip()
            headers[key] = headers[key] + ", " + value if key in headers else value
        return Head(version, int(status), reason[0] if reason else "", headers)
    except ValueError as e:
        raise ProtocolError("not an HTTP answer: %s" % e) from None


def framing(head: Head, method: str) -> Tuple[str, int]:
    """How the body is delimited: ("none", 0), ("length", n), ("chunked", 0) or
    ("close", 0) (read to the end of the connection)."""
    if method == "HEAD" or head.status in (204, 304) or 100 <= head.status < 200:
        return ("none", 0)
    if "chunked" in head.tokens("transfer-encoding"):
        return ("chunked", 0)
    cl = head.header("content-length")
    if cl:
        try:
            n = int(cl)
        except ValueError:
            raise ProtocolError("a bad Content-Length: %r" % cl) from None
        if n < 0 or n > MAX_BODY:
            raise ProtocolError("a Content-Length out of range: %d" % n)
        return ("length", n)
    return ("close", 0)


def reusable(head: Head, frame: str) -> bool:
    """Whether the connection may carry another request after this answer."""
    if frame == "close" or "close" in head.tokens("connection"):
        return False
    return head.version == "HTTP/1.1" or "keep-alive" in head.tokens("connection")


def parse_chunk_size(line: bytes) -> int:
    try:
        n = int(line.split(b";", 1)[0].strip(), 16)
    except ValueError:
        raise ProtocolError("a bad chunk size: %r" % line[:40]) from None
    if n < 0 or n > MAX_BODY:
        raise ProtocolError("a chunk size out of range")
    return n


def answer(call: Call, status: int, raw: bytes, sent: float) -> Any:
    """The call's result from its answer, or the error it is raised as."""
    if call.text and status // 100 == 2:
        return raw.decode("utf-8", "replace")
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = None
    if status // 100 == 2 or status in call.accept:
        if not isinstance(doc, dict):
            raise ProtocolError("HTTP %d with a body that is not a JSON object" % status,
                                status=status)
        return call.parse(doc, sent)
    raise error_from_reply(status, doc)


# -- the duplex streamed hold (docs/DESIGN.md section 10) ------------------------------------
def hold_call(call: Call) -> Call:
    """The acquire as a duplex streamed hold (hold=stream, sent with Upgrade)."""
    body = dict(call.body or {})
    body["hold"] = "stream"
    return Call(call.method, call.path, call.parse, body, call.query, call.wait,
                replay=False)


def ping_line(n: int) -> bytes:
    return b'{"ping":%d}\n' % n


RELEASE_LINE = b'{"release":true}\n'


def duplex_grant(call: Call, line: bytes, sent: float) -> Tuple[Any, float]:
    """The grant line of a duplex hold: (the Grant or PermitGrant, ping interval s)."""
    doc = _line_doc(line)
    if doc is None or "event" in doc:
        raise ProtocolError("a duplex hold whose first line is not a grant: %r" % line[:200])
    ping = doc.get("ping_ms")
    if not isinstance(ping, int) or isinstance(ping, bool) or ping < 1:
        raise ProtocolError("a duplex grant without ping_ms: %r" % line[:200])
    return call.parse(doc, sent), ping / 1000.0


def hold_event(line: bytes) -> Tuple[str, Dict[str, Any]]:
    """One line of a duplex hold after its grant: ("alive", doc) with an int ping and
    validity_ms, ("released", doc), ("lost", doc), or ("bad", {"line": ...})."""
    doc = _line_doc(line)
    ev = doc.get("event") if doc is not None else None
    if ev == "alive":
        ping, v = doc.get("ping"), doc.get("validity_ms")
        if all(isinstance(x, int) and not isinstance(x, bool) for x in (ping, v)):
            return "alive", doc
    elif ev in ("released", "lost"):
        return ev, doc
    return "bad", {"line": line[:200]}


def _line_doc(line: bytes) -> Optional[Dict[str, Any]]:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def event_reason(kind: str, doc: Mapping[str, Any]) -> str:
    reason = doc.get("reason")
    if kind == "released":
        return "released by someone else" + (" (%s)" % reason if reason else "")
    if kind == "lost":
        return "the service could not keep it (lost: %s)" % reason
    return "an unexpected line in the stream: %r" % doc.get("line")


def check_token(token: Optional[str]) -> Optional[str]:
    if token is not None and (not isinstance(token, str) or any(c in token for c in "\r\n")):
        raise ValueError("a token is a string without line breaks")
    return token

