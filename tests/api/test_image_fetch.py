"""The hosted-image fetcher (`api.checking.image_fetch`, one image's fetch in `api.checking.image_download`, the
address rule in `api.checking.image_addresses`): the strict address rule on addresses, and every protection
against an HTTPS server on loopback (`tests/api/image_server.py`). The service fetches a client's URL only where an
operator allowed that host, and these tests do it on loopback only: loopback is refused by the strict rule, so they
loosen it through the fetcher's `address_allowed` seam (`loopback_only`) and trust their own certificate through its
`ssl_context` seam; the strict rule itself is tested on addresses alone."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
import socket
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import pytest

from api.checking import image_download, image_fetch
from api.checking.image_addresses import IPAddress, address_public
from api.checking.image_download import Fetcher, FetchFailed, body_read
from api.checking.image_download import image_fetch as fetch
from api.checking.image_fetch import hosted_images_fetch
from api.checking.images import ImageLimits, host_allowed, hosted_image, hosted_of
from inference.errors import Problem
from inference.images import Image, ImageMeta
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from tests.api.image_server import PNG, ImageServer, image_server

LIMIT = 4096
DEADLINE = 1.0
URL_META = ImageMeta(source="url")


def loopback_only(address: IPAddress) -> bool:
    """The test seam's rule: loopback addresses only (the strict rule refuses them)."""
    return address.is_loopback


@pytest.fixture(scope="module")
def server() -> Iterator[ImageServer]:
    with image_server() as found:
        yield found


@pytest.fixture
def served(server: ImageServer) -> ImageServer:
    server.seen.clear()
    server.body_bytes_sent.clear()
    return server


def fetcher_for(server: ImageServer, **changes: Any) -> Fetcher:
    return replace(
        Fetcher(timeout=DEADLINE, max_bytes=LIMIT, address_allowed=loopback_only, ssl_context=server.client_context),
        **changes,
    )


async def failure(url: str, fetcher: Fetcher) -> FetchFailed:
    with pytest.raises(FetchFailed) as raised:
        await fetch(url=url, fetcher=fetcher)
    return raised.value


# -- The strict address rule ---------------------------------------------------------------------------------------

REFUSED = [
    "127.0.0.1",  # loopback
    "127.8.9.10",
    "10.1.2.3",  # private
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # link-local (cloud metadata)
    "100.64.0.1",  # shared address space (carrier NAT)
    "0.0.0.0",  # unspecified
    "224.0.0.1",  # multicast
    "240.0.0.1",  # reserved
    "255.255.255.255",
    "192.0.2.1",  # documentation
    "::1",
    "::",
    "fe80::1",
    "fc00::1",  # unique local
    "ff02::1",  # multicast (Python calls it global)
    "2001:db8::1",  # documentation
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "::ffff:10.0.0.1",
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"]


@pytest.mark.parametrize("address", REFUSED)
def test_the_strict_rule_refuses_every_address_that_is_not_public(address):
    assert not address_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_the_strict_rule_takes_public_addresses(address):
    assert address_public(ipaddress.ip_address(address))


async def test_a_name_resolving_to_a_public_and_a_private_address_is_refused_before_any_connection(served):
    calls: list[str] = []

    def resolving_to(*addresses: str) -> Any:
        async def resolve(host: str, port: int) -> list[str]:
            calls.append(host)
            return list(addresses)

        return resolve

    url = served.url("/logo.png", host="images.test")
    strict = fetcher_for(served, resolve=resolving_to("93.184.216.34", "10.0.0.5"), address_allowed=address_public)
    refused = await failure(url, strict)
    assert refused.kind == "image_url_not_allowed" and "private" in refused.message
    # The same with the loopback seam: one address it takes (where the server is), one it does not.
    mixed = await failure(url, fetcher_for(served, resolve=resolving_to("127.0.0.1", "10.0.0.5")))
    assert mixed.kind == "image_url_not_allowed"
    localhost = await failure(served.url("/logo.png"), fetcher_for(served, address_allowed=address_public))
    assert localhost.kind == "image_url_not_allowed"  # the real resolver's loopback, refused by the strict rule
    assert calls == ["images.test", "images.test"] and served.seen == []


# -- Which URLs and hosts --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("images.example.com", True),
        ("a.cdn.example.org", True),
        ("a.b.cdn.example.org", True),
        ("cdn.example.org", False),  # the bare domain is not under `*.cdn.example.org`
        ("evilcdn.example.org", False),
        ("images.example.com.evil.net", False),
        ("example.com", False),
    ],
)
def test_hosts_are_allowed_exactly_or_under_a_wildcard_domain(host, allowed):
    assert host_allowed(host=host, hosts=("images.example.com", "*.cdn.example.org")) is allowed


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://images.example.com/a.png", "only https"),
        ("https://user:secret@images.example.com/a.png", "credentials"),
        ("https://images.example.com@evil.net/a.png", "credentials"),
        ("https://images.example.com:99999/a.png", "cannot be read"),
        ("https://[::1]/a.png", "not a host name"),
        ("https://images_example.com/a.png", "not a host name"),
    ],
)
def test_a_url_that_is_not_plain_https_to_a_host_name_is_not_fetched(url, reason):
    found = hosted_of(url)
    assert isinstance(found, str) and reason in found


def test_the_url_is_read_once_into_the_host_port_and_target_the_fetcher_uses():
    found = hosted_of("https://Images.Example.COM.:8443/a b/ü.png?x=1#frag")
    assert not isinstance(found, str)
    assert (found.host, found.port, found.target) == ("images.example.com", 8443, "/a%20b/%C3%BC.png?x=1")


def test_a_host_not_allowed_is_refused_naming_the_setting():
    problem = hosted_image(url="https://evil.net/a.png", loc=("x",), limits=ImageLimits(1, url_hosts=("a.com",)))
    assert isinstance(problem, Problem) and problem.type == "image_url_not_allowed"
    assert "OPENJEV_IMAGE_URL_HOSTS" in problem.msg
    image = hosted_image(url="https://a.com/a.png", loc=("x",), limits=ImageLimits(1, url_hosts=("a.com",)))
    assert isinstance(image, Image) and image.url == "https://a.com/a.png"


def test_the_setting_reads_host_names_and_wildcard_domains_and_refuses_anything_else():
    config = config_from_env({"OPENJEV_IMAGE_URL_HOSTS": " Images.Example.com., *.cdn.example.org,,images.example.com"})
    assert config.image_url_hosts == ("images.example.com", "*.cdn.example.org")
    assert config_from_env({}).image_url_hosts == () and config_from_env({}).image_fetch_timeout == 10.0
    for bad in ("*", "*.", "https://images.example.com", "a b.com", "images.example.com/x"):
        with pytest.raises(ConfigError, match="OPENJEV_IMAGE_URL_HOSTS"):
            config_from_env({"OPENJEV_IMAGE_URL_HOSTS": bad})


# -- Fetching ---------------------------------------------------------------------------------------------------------


async def test_an_allowed_https_image_is_fetched_as_bytes_with_the_host_name_in_sni_and_host(served):
    image = await fetch(url=served.url("/logo.png?size=8"), fetcher=fetcher_for(served))
    assert image.url == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert image.meta.source == "url" and image.meta.format == "png" and image.meta.size == len(PNG)
    assert image.meta.sha256 == hashlib.sha256(PNG).hexdigest()
    (seen,) = served.seen
    assert (seen.server_name, seen.host, seen.path) == ("localhost", f"localhost:{served.port}", "/logo.png?size=8")


async def test_the_connection_goes_to_the_checked_address_and_the_name_is_never_resolved_again(served, monkeypatch):
    """DNS rebinding: the name resolves once, to an address that is checked, and the connection goes to that address
    by IP. A second answer (here a private one), or any other resolution of the name, is never used."""
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    real = socket.getaddrinfo

    def no_other_resolution(host: Any, *args: Any, **kwargs: Any) -> Any:
        assert host != "images.test", "the name was resolved again, past the check"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_other_resolution)
    image = await fetch(url=served.url("/logo.png", host="images.test"), fetcher=fetcher_for(served, resolve=rebinding))
    assert image.meta.size == len(PNG) and calls == ["images.test"]
    (seen,) = served.seen
    assert seen.server_name == "images.test" and seen.host == f"images.test:{served.port}"


async def test_a_certificate_that_is_not_for_the_name_or_not_trusted_is_refused(served):
    async def to_loopback(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    other = await failure(served.url("/logo.png", host="other.test"), fetcher_for(served, resolve=to_loopback))
    assert other.kind == "image_fetch_failed" and "TLS" in other.message
    untrusted = await failure(served.url("/logo.png"), fetcher_for(served, ssl_context=None))  # the public CAs
    assert untrusted.kind == "image_fetch_failed"
    assert served.seen == []


async def test_a_redirect_is_refused_and_not_followed(served):
    refused = await failure(served.url("/redirect"), fetcher_for(served))
    assert refused.kind == "image_fetch_failed" and "redirect" in refused.message and "302" in refused.message
    assert [s.path for s in served.seen] == ["/redirect"]


async def test_an_error_status_and_a_compressed_body_are_refused(served):
    missing = await failure(served.url("/missing.png"), fetcher_for(served))
    assert missing.kind == "image_fetch_failed" and "HTTP 404" in missing.message
    gzip = await failure(served.url("/gzip"), fetcher_for(served))
    assert gzip.kind == "image_fetch_failed" and "gzip" in gzip.message


async def test_a_body_that_is_not_an_image_is_refused(served):
    refused = await failure(served.url("/text"), fetcher_for(served))
    assert refused.kind == "image_format"


async def test_a_body_over_the_limit_is_refused_without_reading_the_rest(served):
    started = time.perf_counter()
    endless = await failure(served.url("/endless"), fetcher_for(served, timeout=10.0))
    assert endless.kind == "image_too_large" and f"limit of {LIMIT}" in endless.message
    assert time.perf_counter() - started < 5.0  # stopped at the limit, not at the deadline or the 64 MiB
    declared = await failure(served.url("/declared-huge"), fetcher_for(served))
    assert declared.kind == "image_too_large" and str(10**9) in declared.message


async def test_reading_a_body_keeps_at_most_the_limit_plus_one_bytes_and_stops_there():
    pulled: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            pulled.append(1000)
            yield bytes(1000)

    body = await body_read(chunks(), limit=2500)
    assert len(body) == 2501 and len(pulled) == 3
    pulled.clear()
    assert await body_read(chunks(), limit=100_000) == bytes(100_000) and len(pulled) == 100


async def test_a_slow_server_is_refused_within_the_deadline(served):
    started = time.perf_counter()
    url = served.url("/slow")
    fetched, problems = await hosted_images_fetch(
        hosted=[(Image(url=url, meta=URL_META), ("x",))], fetcher=fetcher_for(served, timeout=0.5)
    )
    elapsed = time.perf_counter() - started
    assert fetched == {} and [(p.loc, p.type) for p in problems] == [(("x",), "image_fetch_failed")]
    assert "within 0.5 s" in problems[0].msg and elapsed < 2.0


async def test_a_name_that_does_not_resolve_is_a_fetch_failure(served):
    async def nowhere(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    refused = await failure(served.url("/logo.png", host="images.test"), fetcher_for(served, resolve=nowhere))
    assert refused.kind == "image_fetch_failed" and "resolved" in refused.message


async def test_each_distinct_url_is_fetched_once_a_few_at_a_time_and_every_place_gets_its_problem(served, monkeypatch):
    good, bad = served.url("/logo.png"), served.url("/text")
    hosted = [(Image(url=u, meta=URL_META), (i,)) for i, u in enumerate([good, bad, good, bad])]
    in_flight = peak = 0
    real = image_download._get

    async def counted(**kwargs: Any) -> bytes:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.05)
            return await real(**kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(image_download, "_get", counted)
    fetched, problems = await hosted_images_fetch(hosted=hosted, fetcher=fetcher_for(served, concurrency=1))
    assert list(fetched) == [good] and [(p.loc, p.type) for p in problems] == [
        ((1,), "image_format"),
        ((3,), "image_format"),
    ]
    assert peak == 1 and sorted(s.path for s in served.seen) == ["/logo.png", "/text"]


async def test_the_process_runs_a_bounded_number_of_fetches_and_a_request_finding_no_room_gets_529(served, monkeypatch):
    """The review's repro: 150 requests of four slow URLs each held 529 TLS connections. However many requests
    fetch at once, at most `PROCESS_CONCURRENCY` fetches run; one whose images never find room before its deadline
    is told the server is busy (529), not that its URL failed."""
    monkeypatch.setattr(image_fetch, "PROCESS_CONCURRENCY", 3)
    monkeypatch.setattr(image_fetch, "_process_slots", weakref.WeakKeyDictionary())
    in_flight = peak = 0

    async def slow(**kwargs: Any) -> bytes:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.3)
            raise image_download.FetchFailed("slow")
        finally:
            in_flight -= 1

    monkeypatch.setattr(image_download, "_get", slow)
    fetcher = fetcher_for(served, timeout=0.5)

    async def request(n: int) -> Exception | tuple[dict[str, Image], list[Problem]]:
        urls = [served.url(f"/slow-{n}-{i}.png") for i in range(4)]
        hosted = [(Image(url=u, meta=URL_META), (i,)) for i, u in enumerate(urls)]
        try:
            return await hosted_images_fetch(hosted=hosted, fetcher=fetcher)
        except image_fetch.FetchesFull as exc:
            return exc

    outcomes = await asyncio.gather(*(request(n) for n in range(12)))
    assert peak == 3
    busy = [o for o in outcomes if isinstance(o, image_fetch.FetchesFull)]
    assert busy and "as many images as it may at once (3)" in str(busy[0])
    assert all(isinstance(o, tuple) and len(o[1]) == 4 for o in outcomes if o not in busy)
