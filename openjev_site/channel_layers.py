"""The channel layer: in-memory in one process, or Redis so several API processes feed one dashboard.

The live dashboard (`audit.livefeed`) sends each process's tallies to a channels group. In
memory, that group reaches only the dashboards served by the same process, which is all there is
with one API process. Behind a load balancer with several, `OPENJEV_CHANNEL_LAYER_URL=redis://...`
puts the group in Redis (`channels-redis`), so whichever process serves a dashboard sees them all.
The WebSocket stream of evaluations never uses the layer: it answers on its own socket.
"""

from __future__ import annotations

from typing import Any

CHANNEL_PREFIX = "openjev"
"""Keys in Redis start with this, so a Redis shared with other apps keeps ours apart."""


def channel_layers_config(*, url: str | None) -> dict[str, Any]:
    """Django's `CHANNEL_LAYERS` for `OPENJEV_CHANNEL_LAYER_URL` (validated by `config_from_env`)."""
    if not url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [url], "prefix": CHANNEL_PREFIX},
        }
    }
