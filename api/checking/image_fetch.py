"""Hosted image URLs fetched by the service itself, only from the hosts an operator allows, and sent on as bytes.

Off by default: with `OPENJEV_IMAGE_URL_HOSTS` unset nothing here runs (the Decisions routes refuse hosted URLs,
System One's go to the backend as sent). With hosts named, the parsers take only https URLs of those hosts
(`api.checking.images.hosted_image`) and each route's service fetches them
(`api.plumbing.evaluate.hosted_images_fetched`) after parsing, before the evaluation (so after the per-key
admission, which the plumbing does before the body is read). The backend then gets a `data:` URL and never fetches
a client's URL. This module fetches a request's images together (one deadline, the process's cap); one image's
fetch is `api.checking.image_download`, the address rule and the resolver `api.checking.image_addresses`. What
protects the network the service runs in:

- **Host allow-list.** Only hosts the operator named (exact, or under a `*.domain`), https only, no credentials in
  the URL. The URL is parsed once (`hosted_of`): the host checked is the host connected to, and the request is
  built from that host, port and path, never from the URL text again, so no second parser can read another host in
  it.
- **Every resolved address checked.** The host is resolved by the service (`getaddrinfo`, in a small thread pool
  of its own, under the deadline) and the fetch is refused if *any* address is private, loopback, link-local,
  multicast, reserved, unspecified or otherwise not global (`address_public`; IPv4 inside IPv6 — mapped, 6to4,
  Teredo, NAT64 — is checked as the IPv4 it carries). A name that resolves to a public and a private address is refused.
- **No DNS rebinding.** The connection goes to one of the addresses just checked, by IP (`https://<ip>:<port>`),
  with the TLS server name (SNI) and `Host` header set to the host name and the certificate verified for that name.
  The name is never resolved again, so a second answer (a rebinding DNS server's) cannot move the connection.
  Each image gets its own client and connection: a connection verified for one name is never reused for another.
- **No redirects.** A 3xx is a 400 saying so; any status but 200 is refused.
- **No proxies, no environment.** The client ignores `HTTPS_PROXY` and friends (`trust_env=False`): a proxy would
  resolve the name itself.
- **Bounded size.** `Accept-Encoding: identity`, and a compressed body is refused (no decompression bomb); a
  `Content-Length` over `OPENJEV_MAX_IMAGE_BYTES` is refused before the body is read, and the body is read raw
  and abandoned as soon as it holds more than the limit (at most the limit + 1 bytes kept).
- **Bounded time.** All the fetches of one request run under one deadline, `OPENJEV_IMAGE_FETCH_TIMEOUT` (10 s by
  default): resolution, connection, TLS, headers and body together. At most `max_images` URLs (each counted
  against the request's limit at parsing), `CONCURRENCY` at a time; the same URL twice is fetched once. At most
  `PROCESS_CONCURRENCY` fetches run at once in the whole process, whatever the requests: a request whose images
  find no room before its deadline is a 529 (the server is busy; retry), not a 400 blamed on its URLs. 150
  requests of four slow URLs each held 529 TLS connections open before this cap.
- **Checked bytes.** The body must be an image in an accepted format (magic bytes, `api.checking.images`); it then
  counts against the per-request image bytes like any other image.

Every failure is a 400 (422 on System One, as its other image problems) located at the image in the body:
`image_url_not_allowed`, `image_fetch_failed`, `image_too_large`, `image_format`; never a 5xx for a client's URL.

The test seams are the `Fetcher`'s fields (`resolve`, `address_allowed`, `ssl_context`): the tests fetch from an
HTTPS server on loopback, which the strict rule refuses, and the strict rule is tested on its own.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace

import httpx
from django.conf import settings

from api.checking.image_download import Fetcher, FetchFailed, image_fetch
from api.checking.images import ImageLimits, images_total_check, is_hosted
from api.checking.json_body import Loc
from inference.errors import Overloaded, Problem, RequestInvalid
from inference.images import Image
from inference.requests import EvaluationRequest

PROCESS_CONCURRENCY = 32
"""Fetches of all requests at once in one process (one connection each)."""

_process_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def process_slots() -> asyncio.Semaphore:
    """The process's `PROCESS_CONCURRENCY` fetch slots (one set per event loop: a semaphore belongs to one)."""
    loop = asyncio.get_running_loop()
    slots = _process_slots.get(loop)
    if slots is None:
        slots = _process_slots[loop] = asyncio.Semaphore(PROCESS_CONCURRENCY)
    return slots


class FetchesFull(Overloaded):
    """The process was fetching `PROCESS_CONCURRENCY` images until this request's deadline: a 529."""


def fetcher_configured(*, limits: ImageLimits) -> Fetcher:
    """The deployment's fetcher (`OPENJEV_IMAGE_FETCH_TIMEOUT`, `OPENJEV_MAX_IMAGE_BYTES`). Tests replace this
    function to fetch from loopback with their own certificate."""
    return Fetcher(timeout=settings.OPENJEV.image_fetch_timeout, max_bytes=limits.max_image_bytes)


async def hosted_images_fetch(
    *, hosted: Sequence[tuple[Image, Loc]], fetcher: Fetcher
) -> tuple[dict[str, Image], list[Problem]]:
    """Every distinct URL fetched, `fetcher.concurrency` at a time and in one of the process's slots, all within
    `fetcher.timeout`: the images by URL, and the problem of each that failed, at every place it stands; FetchesFull
    (529) when one never found a slot before the deadline."""
    limit, slots = asyncio.Semaphore(fetcher.concurrency), process_slots()
    waiting: set[str] = set()
    """URLs whose turn in the request came, waiting for a slot of the process."""

    async def one(url: str) -> Image:
        async with limit:
            waiting.add(url)
            async with slots:
                waiting.discard(url)
                return await image_fetch(url=url, fetcher=fetcher)

    tasks = {url: asyncio.ensure_future(one(url)) for url in dict.fromkeys(image.url for image, _ in hosted)}
    if not tasks:
        return {}, []
    try:
        _, pending = await asyncio.wait(tasks.values(), timeout=fetcher.timeout)
    finally:  # past the deadline, or the request itself cancelled (its client gone): no fetch outlives it
        for task in tasks.values():
            task.cancel()
    if pending:
        await asyncio.wait(pending)
    if waiting:
        raise FetchesFull(
            f"the service is fetching as many images as it may at once ({PROCESS_CONCURRENCY}); retry shortly"
        )
    fetched: dict[str, Image] = {}
    failed: dict[str, FetchFailed] = {}
    for url, task in tasks.items():
        if task in pending:
            failed[url] = FetchFailed(f"the image was not fetched within {fetcher.timeout:g} s")
        elif isinstance(error := task.exception(), FetchFailed):
            failed[url] = error
        elif isinstance(error, httpx.HTTPError | OSError | ValueError):
            failed[url] = FetchFailed(f"the image could not be fetched ({type(error).__name__})")
        elif error is not None:
            raise error
        else:
            fetched[url] = task.result()
    problems = [
        Problem(loc, failed[image.url].message, failed[image.url].kind) for image, loc in hosted if image.url in failed
    ]
    return fetched, problems


def evaluation_with_images(*, evaluation: EvaluationRequest, fetched: Mapping[str, Image]) -> EvaluationRequest:
    """`evaluation` with each hosted image replaced by its fetched bytes (by URL)."""

    def swapped(part: str | Image) -> str | Image:
        return fetched.get(part.url, part) if isinstance(part, Image) and is_hosted(part) else part

    conversation = tuple(
        m if isinstance(m.content, str) or not m.images else replace(m, content=tuple(map(swapped, m.content)))
        for m in evaluation.conversation
    )
    questions = tuple(
        q if not q.images else replace(q, parts=tuple(map(swapped, q.parts))) for q in evaluation.questions
    )
    return EvaluationRequest(conversation=conversation, questions=questions)


async def request_images_fetched(
    *, evaluation: EvaluationRequest, hosted: Sequence[tuple[Image, Loc]], limits: ImageLimits
) -> EvaluationRequest:
    """`evaluation` with its `hosted` images (each with where it stands in the body) fetched and held as bytes; the
    request's image bytes then checked again. RequestInvalid names every image that could not be fetched, at its
    place. Nothing is fetched unless the operator allows hosts (`OPENJEV_IMAGE_URL_HOSTS`)."""
    if not limits.url_hosts or not hosted:
        return evaluation
    fetched, problems = await hosted_images_fetch(hosted=hosted, fetcher=fetcher_configured(limits=limits))
    if problems:
        raise RequestInvalid(problems)
    evaluation = evaluation_with_images(evaluation=evaluation, fetched=fetched)
    total = images_total_check(images=[(image, ()) for image in evaluation.images], limits=limits)
    if total:
        raise RequestInvalid(total)
    return evaluation
