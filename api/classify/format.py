"""SGLang's and vLLM's classify API over saved classifiers, as the shared plumbing reads it
(`api.plumbing.formats`): their error shape and their request id format (`classify-<hex>`, which their clients
read back from the body)."""

from __future__ import annotations

from api.classify.answer import classify_answer
from api.classify.errors import CLASSIFY_SHAPE
from api.classify.registry import classifier_names_list
from api.classify.service import classify_check
from api.plumbing.formats import WireFormat

FORMAT = WireFormat(
    name="classify",
    label="Classify (POST /v1/classify)",
    path="/v1/classify",
    serve=classify_answer,
    check=classify_check,
    shape=CLASSIFY_SHAPE,
    request_id_prefix="classify-",
    models=classifier_names_list,
)
