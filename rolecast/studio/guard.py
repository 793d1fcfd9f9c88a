"""The studio's checks on every request (ASGI middleware, :class:`Guard`) and the loopback rule.

* ``Host`` must be one this server answers to: with a loopback bind, only loopback names (a page on
  another site that points its own DNS name at 127.0.0.1 is refused: DNS rebinding);
* with an access token, a request must carry it;
* a change (POST) must come from this server's own origin (its name and port) when the browser says
  where it comes from, carry the page's CSRF token, and be small: what can be refused from its
  headers is refused before a byte of its body is read, and its body is read up to
  :data:`MAX_BODY` bytes, no further.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.responses import RedirectResponse, Response

CSRF_FIELD = "csrf"
TOKEN_COOKIE = "rolecast_studio_token"
#: the most a POST's body may hold (bytes): the studio's forms are small (an edited approval's arguments
#: the biggest); a bigger one is refused unread
MAX_BODY = 1 << 20

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")


class Guard:
    """The studio's checks on every request, as ASGI middleware (it lets the live stream through
    untouched, which Starlette's ``BaseHTTPMiddleware`` would buffer).

    * ``Host`` must be one this server answers to: with a loopback bind, only loopback names (a
      page on another site that points its own DNS name at 127.0.0.1 is refused: DNS rebinding);
    * with an access ``token``, a request must carry it: ``Authorization: Bearer``, the cookie a
      first visit with ``?token=`` sets, or that query itself;
    * a POST must carry the CSRF token of the page's form (``csrf`` field or ``X-CSRF-Token``
      header) and, when the browser says where it comes from (``Origin``), come from this server.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, csrf: str, hosts: tuple[str, ...] | None):
        self.app, self.token, self.csrf, self.hosts = app, token, csrf, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if self.hosts is not None and _hostname(host) not in self.hosts:
            await plain(403, f"rolecast studio: requests must name this server as their host, not {host!r}")(
                scope, receive, send)
            return
        if self.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = _bearer(headers.get("authorization", "")) or _cookie(headers.get("cookie", ""), TOKEN_COOKIE)
            from_query = (query.get("token") or [None])[0]
            if from_query is not None and _same(from_query, self.token) and scope["method"] == "GET":
                # a first visit with the printed URL: keep the token in a cookie, drop it from the address
                rest = {k: v for k, v in query.items() if k != "token"}
                target = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, send)
                return
            if given is None or not _same(given, self.token):
                await plain(401, "rolecast studio: this server needs its access token (printed when it started): "
                                  "open the URL it printed, or send 'Authorization: Bearer TOKEN'")(
                    scope, receive, send)
                return
        if scope["method"] not in ("GET", "HEAD"):
            refusal = self._refuse_change(headers)
            if refusal is None:
                body, receive, refusal = await _buffer(receive)
                sent = headers.get("x-csrf-token") or _form_field(headers, body, CSRF_FIELD)
                if refusal is None and (sent is None or not _same(sent, self.csrf)):
                    refusal = plain(403, "rolecast studio: the form's CSRF token is missing or stale; reload the page")
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, _with_headers(send))


    def _refuse_change(self, headers: dict[str, str]) -> Response | None:
        """What a POST is refused with before a byte of its body is read (None: read it): another
        origin (host and port), a body said to be over :data:`MAX_BODY`, a wrong ``X-CSRF-Token``."""
        origin = headers.get("origin")
        if origin is not None and origin != "null" and not _same_origin(origin, headers.get("host", "")):
            return plain(403, "rolecast studio: a change must come from the studio's own pages (Origin)")
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            return plain(400, "rolecast studio: Content-Length is not a number")
        if length > MAX_BODY:
            return _too_big()
        given = headers.get("x-csrf-token")
        if given is not None and not _same(given, self.csrf):
            return plain(403, "rolecast studio: the form's CSRF token is missing or stale; reload the page")
        return None


def _too_big() -> Response:
    return plain(413, f"rolecast studio: a form is at most {MAX_BODY:,} bytes")


def _same_origin(origin: str, host: str) -> bool:
    """Whether an ``Origin`` (``http://name:port``) names the server a request's ``Host`` names: the
    same name and the same port (a page on another port of this machine is another origin)."""
    scheme, _, rest = origin.strip().lower().partition("://")
    if scheme not in ("http", "https") or "/" in rest:
        return False
    default = "443" if scheme == "https" else "80"
    return _host_port(rest, default) == _host_port(host.strip().lower(), default)


def _host_port(netloc: str, default: str) -> tuple[str, str]:
    name = _hostname(netloc)
    port = netloc[len(name):].lstrip(":") or default
    return name, port


def _with_headers(send: Send) -> Send:
    """Every response says: our scripts and styles only, no framing, no sniffing, no referrer."""
    extra = [
        (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self'; "
                                     b"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                                     b"base-uri 'none'; form-action 'self'"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
    ]

    async def wrapped(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


def plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bearer(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _form_field(headers: dict[str, str], body: bytes, name: str) -> str | None:
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return None
    values = parse_qs(body.decode("utf-8", "replace")).get(name)
    return values[0] if values else None


async def _buffer(receive: Receive) -> tuple[bytes, Receive, Response | None]:
    """Read a request's body (a form: small) and hand the app a ``receive`` that gives it again; a body
    past :data:`MAX_BODY` is not read further (its refusal, third)."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return b"", receive, _too_big()
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    given = False

    async def again() -> MutableMapping[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again, None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost`` or a loopback address (127.0.0.0/8, ::1)
    itself — not a name that merely starts with ``127.`` (``127.attacker.example`` is anyone's)."""
    name = host.strip().lower()
    name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind: str) -> tuple[str, ...] | None:
    """The ``Host`` names a server bound to ``bind`` answers to: loopback names for a loopback bind,
    any for another (that server requires its token instead)."""
    if is_loopback(bind):
        return (*_LOOPBACK_NAMES, bind)
    return None


__all__ = ["CSRF_FIELD", "MAX_BODY", "TOKEN_COOKIE", "Guard", "allowed_hosts", "is_loopback", "plain"]
