"""The classification response in SGLang's and vLLM's shape (`POST /v1/classify`)."""

from __future__ import annotations

from typing import Any

from api.classify.service import Classified


def classified_render(*, classified: Classified) -> dict[str, Any]:
    """The SGLang / vLLM response: `usage.prompt_tokens` counts every token the backend read (warm-ups
    and branches, cache hits included); no tokens are generated for the caller."""
    tokens = classified.outcome.usage.input_tokens
    return {
        "id": classified.request_id,
        "object": "list",
        "created": classified.created,
        "model": classified.classifier.name,
        "data": [
            {"index": item.index, "label": item.label, "probs": list(item.probs), "num_classes": len(item.probs)}
            for item in classified.items
        ],
        "usage": {
            "prompt_tokens": tokens,
            "total_tokens": tokens,
            "completion_tokens": 0,
            "prompt_tokens_details": None,
        },
    }
