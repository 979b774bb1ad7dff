"""What storage keeps of one API call, as typed values: built by the endpoint that served the call.

Each endpoint knows what it received and what it answered, so it describes the call once, here, and
storage never reads a request body again: no question is recounted from JSON, no endpoint's body is
special-cased. The request's JSON as sent is kept beside the counts because the audit shows exactly
what the model was asked (key order included).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from audit.callers import Caller
from inference.images import ImageMeta
from inference.runner import Outcome
from serving.config import StoreLevel

Api = str
"""A wire format's name (`WireFormat.name`): whichever formats the settings install (`audit.apis`)."""


@dataclass(frozen=True)
class ClassifierLink:
    """The classifier a `POST /v1/classify` asked for: its row (None when there is none) and its name
    as requested, kept after the classifier is renamed or deleted."""

    id: int | None
    name: str


@dataclass(frozen=True)
class Received:
    """The request as received: what it asked, and its JSON as sent (kept at level `full`)."""

    requested_model: str
    question_count: int
    question_types: tuple[str, ...]
    """Sorted and distinct."""
    state: Any
    """As sent; the row keeps it without image bytes (`audit.storage.scrub.image_bytes_redact`, applied
    in the writer thread when the row is built)."""
    questions: Any
    classifier: ClassifierLink | None = None
    images: tuple[ImageMeta, ...] = ()
    """What is known of each image of the state, in prompt order: kept at every level."""
    api: Api = "systemone"
    """The wire format the call came through (`Evaluation.api`: the installed formats' names)."""
    safety_identifier: str = ""
    prompt_cache_key: str = ""
    refusal_below: float = 0.0
    """An answer whose label mass is under this was sent as a refusal (the Decisions API's); 0: none is."""


@dataclass(frozen=True)
class Failure:
    """How the call failed, with the status and error type the client got."""

    status: int
    error_type: str
    message: str
    """What operators need: where the client got a generic 5xx, the redacted cause."""
    detail: list[dict[str, Any]] | None = None
    """The validation problems of a 422, as the client got them."""


@dataclass(frozen=True)
class StoredEvaluation:
    """One call that reached an evaluation service, answered (`outcome`) or failed (`failure`)."""

    request_id: str
    created_at: datetime
    level: StoreLevel
    caller: Caller | None
    received: Received
    served_model: str
    backend: str
    total_ms: float
    outcome: Outcome | None = None
    failure: Failure | None = None

    @property
    def status(self) -> int:
        return self.failure.status if self.failure else 200
