"""How a stream socket learns its caller: the key from the upgrade's `Authorization` header or from an auth message,
checked as over HTTP (the same wrong-key throttle), then the socket counted against that key's share of sockets
(`api.systemone.socket_shares`). A socket that never authenticates is closed, so one holds nothing for long.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from rest_framework.exceptions import AuthenticationFailed

from api.plumbing.api_error import ApiError
from api.plumbing.authentication import caller_authenticate
from api.plumbing.ratelimits import subject_of
from api.plumbing.requestids import client_address_bound
from api.systemone.socket_shares import socket_share_return, socket_share_take
from api.systemone.stream_protocol import CLOSE_RATE_LIMITED, CLOSE_STATUS_BASE, CLOSE_UNAUTHENTICATED
from api.systemone.stream_socket import StreamSocket, releasing


class StreamAuthentication(StreamSocket):
    """The socket's authentication: the key checked, the socket's share moved to it, or the socket closed."""

    async def _auth_message(self, message: dict[str, Any]) -> None:
        """Accepted at any time (a browser may always send one, auth on or off); a bad key closes the socket."""
        key = message.get("api_key")
        if not isinstance(key, str) or not key:
            await self._refuse("the auth message needs an api_key string")
            return
        await self._authenticate(authorization=f"Bearer {key}")

    async def _authenticate(self, *, authorization: str | None) -> None:
        """The key checked as over HTTP, from this socket's address: a wrong one counts in the address's wrong-key
        throttle (4401), an address over it is closed with 4429 whatever the key, and the socket then counts
        against its key's share."""
        try:
            with client_address_bound(address=self.address):
                caller = await caller_authenticate(authorization=authorization)
        except AuthenticationFailed as exc:
            await self._refuse(str(exc.detail))
            return
        except ApiError as exc:  # 429: too many wrong keys from this address; 503: keys cannot be checked now
            await self._close(code=CLOSE_STATUS_BASE + exc.status, reason=exc.message)
            return
        if not await self._share_move(subject=subject_of(caller=caller, address=self.address)):
            return
        self.caller = caller
        self.authenticated = True

    async def _share_move(self, *, subject: str) -> bool:
        """Count this socket for `subject` instead (`api.systemone.socket_shares`): its key once it authenticated,
        its address with auth off. One that already holds its share gets the socket closed with 4429."""
        if subject == self.share:
            return True
        if not socket_share_take(subject=subject):
            limit = settings.OPENJEV.max_websockets_per_key
            holder = "this API key" if subject.startswith("key:") else "this address"
            await self._close(
                code=CLOSE_RATE_LIMITED,
                reason=f"{holder} holds {limit} sockets, the most one may in this process; close one or retry later",
            )
            return False
        if self.share is not None:
            socket_share_return(subject=self.share, holder=self)
        self.share = subject
        return True

    def _give_way(self) -> None:
        """This socket, still waiting for its key, gives its place to a newer one from its address."""
        closing = asyncio.get_running_loop().create_task(
            self._close(
                code=CLOSE_RATE_LIMITED,
                reason="this address opened more sockets waiting for a key than it may hold; authenticate sooner",
            )
        )
        releasing.add(closing)
        closing.add_done_callback(releasing.discard)

    async def _refuse(self, reason: str) -> None:
        await self._close(code=CLOSE_UNAUTHENTICATED, reason=reason)

    async def _auth_deadline(self, *, seconds: float) -> None:
        """Close a socket still unauthenticated `seconds` after it opened, whatever it sent meanwhile: without
        a deadline, sockets that never authenticate were each held for the whole idle timeout."""
        await asyncio.sleep(seconds)
        if not self.authenticated:
            await self._refuse(f"not authenticated within {seconds:g} s of opening")
