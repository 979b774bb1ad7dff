"""Which host a request may name, and which browser origin counts as this service's own.

DNS rebinding points a name the attacker owns at this service's address: the victim's browser then sends
`Host: evil.example` and an Origin of `http://evil.example`, which agree with each other, so a cross-site
check that only compares the two lets the attacker's page in. `OPENJEV_ALLOWED_HOSTS` (Django's
`ALLOWED_HOSTS`) names the hosts this service answers for; Django checks it only where `request.get_host()`
is called, and the API's lean handler and the WebSocket routes call nothing of the kind, so every route
checks it up front with Django's own rule (`host_allowed`), and the Origin checks compare a browser's
Origin with the validated host, scheme and port included (`origin_same`).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEBUG_HOSTS = (".localhost", "127.0.0.1", "[::1]")
"""Django's hosts while `DEBUG` is on and `ALLOWED_HOSTS` empty (`HttpRequest.get_host`)."""
DEFAULT_PORTS = {"http": 80, "https": 443}
WEBSOCKET_SCHEMES = {"ws": "http", "wss": "https"}
"""A WebSocket's scheme as the origin of the page that opened it writes it."""
HOST_FREE_PATHS = ("/health", "/health/live", "/metrics")
"""Answered whatever the Host: load balancers, orchestrators and Prometheus reach a replica by IP address, which
no host list can name in advance (a pod's address changes); the health checks and the metrics change nothing, and
a page could not read `/metrics` across origins (it is no CORS resource; `OPENJEV_METRICS_TOKEN` guards it where
the network does not)."""


def host_allowed(*, host: str) -> bool:
    """Whether `host` (a Host header, port included or not) is one `ALLOWED_HOSTS` names, by Django's rule."""
    allowed: Iterable[str] = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = DEBUG_HOSTS
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, list(allowed))


def scope_host(*, headers: Iterable[tuple[bytes, bytes]], server: tuple[str, int] | None) -> str:
    """The host a request named: its Host header, else the server's own address (as Django's `get_host`)."""
    for name, value in headers:
        if name == b"host":
            return value.decode("latin-1")
    if server is None:
        return ""
    return f"{server[0]}:{server[1]}"


def origin_same(*, origin: str, scheme: str, host: str) -> bool:
    """Whether a browser's `Origin` is exactly this service's origin: scheme, host and port (`host` validated,
    `scheme` the request's own, from a trusted proxy's `X-Forwarded-Proto` behind TLS termination). A page
    served over http is another origin than one over https, as a browser sees it."""
    scheme = WEBSOCKET_SCHEMES.get(scheme, scheme)
    try:
        theirs, ours = urlsplit(origin), urlsplit(f"{scheme}://{host}")
        their_port = theirs.port or DEFAULT_PORTS.get(theirs.scheme)
        our_port = ours.port or DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is not a number, or out of range
        return False
    return theirs.hostname is not None and (theirs.scheme, theirs.hostname, their_port) == (
        scheme,
        ours.hostname,
        our_port,
    )
