"""Who the client is: the connecting peer, or the address trusted proxies forwarded (`OPENJEV_TRUSTED_PROXIES`).

Every protection that counts per client (the wrong-key throttle, the per-address limits without keys, the
admin's sign-in lockout, the WebSocket shares) and every log line needs the real client's address. Behind a
proxy the peer is the proxy, so every client would share one address (anyone could lock everyone out);
believing `X-Forwarded-For` from anyone instead lets a client rotate it past every limit. So the header is
read only when the peer is a trusted proxy, walked from the right (each proxy appends the address it saw),
and the client is the rightmost hop that is not a trusted proxy, as uvicorn's `ProxyHeadersMiddleware`
does; unlike it, an entry that is not an IP address is never taken as the client (the last hop a trusted
proxy vouched for stands instead). `X-Forwarded-Proto` from a trusted proxy gives the scheme (TLS ended at
the proxy), which the Origin checks compare.

`ForwardedClient` rewrites the ASGI scope's `client` and `scheme` in place, in front of everything, so the
API (`api.plumbing.requestids`), the WebSocket consumers, Django's `REMOTE_ADDR` (django-axes), the per-key limits
and uvicorn's access log all read the one resolved address. The servers themselves trust no header
(`serving.servers`): one rule, whichever server runs and in the tests too.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

from serving.asgi_types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

FORWARDED_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
"""`X-Forwarded-Proto` values taken, as the HTTP scheme they mean (a WebSocket's becomes ws or wss)."""


def address_parse(*, text: str) -> Address | None:
    """`text` as an IP address: bare, `[IPv6]`, `[IPv6]:port` or `IPv4:port` (a port is dropped); None for
    anything else, so a made-up string never becomes an address."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def address_trusted(*, address: Address, trusted: tuple[Network, ...]) -> bool:
    """Whether `address` is one of the trusted proxies (an IPv4 peer seen as `::ffff:a.b.c.d` on a dual-stack
    socket included)."""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return any(address in network or (mapped is not None and mapped in network) for network in trusted)


def client_address_resolve(*, peer: str | None, forwarded_for: str | None, trusted: tuple[Network, ...]) -> str | None:
    """The client's address: `peer`, unless it is a trusted proxy that forwarded `X-Forwarded-For`; then the
    rightmost hop that is not a trusted proxy (every hop trusted: the leftmost). An entry that is not an IP
    address ends the walk: what lies left of it was never vouched for, so the last trusted hop stands."""
    hop = address_parse(text=peer) if peer is not None else None
    if hop is None or forwarded_for is None or not address_trusted(address=hop, trusted=trusted):
        return peer
    for entry in reversed(forwarded_for.split(",")):
        found = address_parse(text=entry)
        if found is None:
            break
        hop = found
        if not address_trusted(address=hop, trusted=trusted):
            break
    return str(hop)


def forwarded_scope_apply(*, scope: Scope, trusted: tuple[Network, ...]) -> None:
    """Set `scope`'s `client` (and `scheme`, from `X-Forwarded-Proto`) to what trusted proxies forwarded; with
    none trusted (the default) the scope is left as it is, at no cost on the request path."""
    if not trusted:
        return
    client = scope.get("client")
    peer = str(client[0]) if client else None
    hop = address_parse(text=peer) if peer is not None else None
    if hop is None or not address_trusted(address=hop, trusted=trusted):
        return
    forwarded: list[str] = []
    proto: str | None = None
    for name, value in scope.get("headers", ()):
        if name == b"x-forwarded-for":
            forwarded.append(value.decode("latin-1"))
        elif name == b"x-forwarded-proto":
            proto = value.decode("latin-1").strip().lower()
    if forwarded:
        address = client_address_resolve(peer=peer, forwarded_for=",".join(forwarded), trusted=trusted)
        if address != peer:
            scope["client"] = (address, 0)
    scheme = FORWARDED_SCHEMES.get(proto or "")
    if scheme is not None:
        scope["scheme"] = scheme.replace("http", "ws") if scope["type"] == "websocket" else scheme


def request_client_address(request: HttpRequest) -> str | None:
    """django-axes' client address (`AXES_CLIENT_IP_CALLABLE`): the one `ForwardedClient` resolved, which Django
    put in `REMOTE_ADDR`, never a header axes would read on its own."""
    address = request.META.get("REMOTE_ADDR")
    return str(address) if address else None


class ForwardedClient:
    """In front of the whole application: HTTP and WebSocket scopes get the resolved client and scheme."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            forwarded_scope_apply(scope=scope, trusted=settings.OPENJEV.trusted_proxies)
        await self.app(scope, receive, send)
