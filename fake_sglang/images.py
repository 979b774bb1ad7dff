"""`image_data` with `input_ids`, as SGLang's multimodal processor takes it (`load_mm_data` and the Qwen-VL
processor in `python/sglang/srt/multimodal/processors/`): the ids are decoded, each
`<|vision_start|>(<|image_pad|>)+<|vision_end|>` run is one image placeholder, the images go to the
placeholders in order, and each placeholder's pads are expanded to as many tokens as the image needs,
valued by the image's hash (`pad_value = hash % 2**30`), so the prefix cache keys on the image itself.

Each item of a batch takes its own list (`null`: none), so one item may carry images the others do not: a
branch of a question whose instructions hold an image sends the shared prefix's images, then its own, and
its placeholders come in that order. The server records each item's images (`FakeSGLang.item_images`).

A request whose placeholders and images disagree is refused: SGLang falls back to its legacy path and
then fails in the processor, and the model would otherwise see images in the wrong places. Without
`image_data` the ids are plain text, placeholders included (SGLang runs no processor then). The fake
expands every image to `tokens` pads instead of measuring it, and fetches no http(s) URL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

from fake_sglang.protocol_errors import BadRequest


@dataclass(frozen=True)
class VisionTokens:
    start: int
    pad: int
    end: int


QWEN3_VISION = VisionTokens(start=151652, pad=151655, end=151653)
"""The Qwen2.5/Qwen3 vocabulary's markers (the fake's default vocabulary)."""


def images_per_item(value: Any, size: int, *, batched: bool) -> list[list[str]]:
    """GenerateReqInput's `_normalize_image_data`: one prompt takes a list (or one image); a batch takes one
    entry per item. Which reading applies is decided by the first entry alone: a list there makes every entry a
    list of images (null or `[]`: none); anything else makes every entry one image (null: none), where a later
    list is one "image" that cannot be loaded."""
    if value is None or value == []:
        return [[] for _ in range(size)]
    if not batched:
        return [_image_list(value, "image_data")]
    if not isinstance(value, list) or len(value) != size:
        raise BadRequest("The length of image_data should be equal to the batch size.")
    if isinstance(value[0], list):
        return [_image_list(entry, f"image_data[{i}]") for i, entry in enumerate(value)]
    for i, entry in enumerate(value):
        if isinstance(entry, list):
            raise BadRequest(
                f"An exception occurred while loading IMAGE data at image_data[{i}]: a list where one image was "
                "expected (image_data[0] is not a list, so each entry is one image)"
            )
    return [_image_list(entry, f"image_data[{i}]") for i, entry in enumerate(value)]


def _image_list(value: Any, what: str) -> list[str]:
    images = [] if value is None or value == [None] else value if isinstance(value, list) else [value]
    for i, image in enumerate(images):
        _image_check(image, f"{what}[{i}]")
    return images


def _image_check(image: Any, what: str) -> None:
    """What `load_image` would fail on here: not a string, a scheme it cannot fetch, bad base64."""
    if not isinstance(image, str):
        raise BadRequest(f"{what} must be a string (URL or base64 data)", validation=True)
    if image.startswith("data:"):
        try:
            base64.b64decode(image.split(",", 1)[1], validate=True)
        except (IndexError, binascii.Error, ValueError):
            raise BadRequest(f"An exception occurred while loading IMAGE data at {what}: invalid base64") from None
    elif not image.startswith(("http://", "https://")):
        raise BadRequest(
            f"An exception occurred while loading IMAGE data at {what}: the fake takes http(s) and data: URLs only"
        )


def _placeholder_end(ids: list[int], start: int, vision: VisionTokens) -> int | None:
    """The index of the `end` marker when a placeholder (`start pad+ end`) begins at `start`."""
    if ids[start] != vision.start or start + 1 >= len(ids) or ids[start + 1] != vision.pad:
        return None
    end = start + 1
    while end < len(ids) and ids[end] == vision.pad:
        end += 1
    return end if end < len(ids) and ids[end] == vision.end else None


def placeholders_count(ids: list[int], vision: VisionTokens) -> int:
    """Image placeholders in `ids`."""
    return sum(_placeholder_end(ids, i, vision) is not None for i, token in enumerate(ids) if token == vision.start)


def placeholders_expand(ids: list[int], images: list[str], vision: VisionTokens, tokens: int) -> list[int]:
    """`ids` with each placeholder's pads replaced by `tokens` pads valued by its image's hash; refused
    when the placeholders and the images disagree."""
    found = placeholders_count(ids, vision)
    if found != len(images):
        raise BadRequest(
            f"Mismatch: the prompt has {found} image placeholder(s) but image_data has {len(images)} image(s)."
        )
    expanded: list[int] = []
    pending = iter(images)
    i = 0
    while i < len(ids):
        end = _placeholder_end(ids, i, vision) if ids[i] == vision.start else None
        if end is None:
            expanded.append(ids[i])
            i += 1
            continue
        value = int.from_bytes(hashlib.sha256(next(pending).encode()).digest()[:8], "big") % (1 << 30)
        expanded += [vision.start, *[value] * tokens]
        i = end  # the end marker is kept by the next step
    return expanded
