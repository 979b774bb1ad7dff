"""A request that brings no key, with auth on, is a 401 before its body is parsed: it costs what was sent to read
and nothing more, so it is not counted against any limit, and an address's key-less requests never lock out the
valid keys sent from it (as wrong keys do past `OPENJEV_BAD_KEYS_PER_MINUTE`: docs/security.md says why)."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.conftest import README_REQUEST

KEY = "sk-without-key-test-0123456789"


async def test_key_less_requests_are_401s_unparsed_and_never_lock_the_address_out(api, fake, settings, monkeypatch):
    from api.plumbing import bodies

    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, bad_keys_per_minute=3)
    parsed: list[int] = []
    parse = bodies.body_parse

    def counted(raw: bytes) -> object:
        parsed.append(len(raw))
        return parse(raw)

    monkeypatch.setattr(bodies, "body_parse", counted)
    large = json.dumps({**README_REQUEST, "state": [[]] * 100_000})
    for _ in range(20):
        response = await api.post("/v1/systemone", content=large, headers={"Content-Type": "application/json"})
        assert response.status_code == 401
    assert parsed == []
    answered = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": f"Bearer {KEY}"})
    assert answered.status_code == 200, answered.text
