"""Which addresses a hosted image may be fetched from, and how a host's addresses are found.

Apart from the fetch itself (`api.checking.image_download`) because this is the rule that keeps a client's URL out
of the network the service runs in (SSRF): a fetch goes only to addresses `address_public` takes, and the names are
resolved in threads of their own so a slow DNS cannot take the threads the rest of the service needs.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""(host, port) -> the addresses the host resolves to, as text."""
RESOLVER_THREADS = 4
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

_resolver = ThreadPoolExecutor(max_workers=RESOLVER_THREADS, thread_name_prefix="image-dns")
"""Name resolution blocks a thread until the resolver gives up; a pool of its own keeps a slow DNS from taking the
default executor's threads (the prompt compiler's)."""


def address_public(address: IPAddress) -> bool:
    """The strict rule: a global unicast address, and any IPv4 address it carries too (IPv4-mapped, 6to4, Teredo,
    NAT64). Private, loopback, link-local, multicast, reserved, unspecified and shared (100.64/10) addresses are
    refused, and so is everything else Python's `ipaddress` does not call global."""
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            candidates.append(address.sixtofour)
        if address.teredo is not None:
            candidates += list(address.teredo)
        if address in _NAT64:
            candidates.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return all(
        a.is_global
        and not (a.is_private or a.is_loopback or a.is_link_local or a.is_multicast or a.is_reserved)
        and not a.is_unspecified
        for a in candidates
    )


async def host_resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (TCP), by the system's resolver in the fetcher's own threads."""
    loop = asyncio.get_running_loop()
    infos = await loop.run_in_executor(
        _resolver, functools.partial(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    )
    return [str(info[4][0]) for info in infos]
