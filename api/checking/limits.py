"""What one request may ask, built from the settings in one place: every wire format's parser checks its body
against a `Limits`, and each format states only where its own rules differ (OpenAI's Decisions API takes up to
400 questions and 10 score levels)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from api.checking.images import ImageLimits


class ModelUnknown(Exception):
    """The body names a model this server does not serve: a format whose clients expect a 404 for it (OpenAI's,
    Google's) raises this rather than a validation problem."""


@dataclass(frozen=True)
class Limits:
    max_questions: int
    max_answers: int
    """Options of a choice, and levels of a score unless `max_levels` says fewer."""
    images: ImageLimits = field(default_factory=ImageLimits)
    max_levels: int | None = None
    """Levels of a score, where a format allows fewer than `max_answers`."""

    @property
    def levels(self) -> int:
        return self.max_answers if self.max_levels is None else min(self.max_levels, self.max_answers)


def limits_configured(*, max_questions: int | None = None, max_levels: int | None = None) -> Limits:
    """The deployment's limits (`OPENJEV_MAX_QUESTIONS`, `OPENJEV_MAX_ANSWERS`, the image limits), with a format's
    own count of questions or of levels where it differs."""
    config = settings.OPENJEV
    return Limits(
        max_questions=config.max_questions if max_questions is None else max_questions,
        max_answers=config.max_answers,
        images=ImageLimits(
            config.max_images, config.max_image_bytes, config.max_request_image_bytes, config.image_url_hosts
        ),
        max_levels=max_levels,
    )


def messages_max() -> int:
    """The most messages (or input items) a conversation may hold: as many as the input budget has tokens, since
    every chat template spends at least one token on each message, so refusing more is refusing what cannot fit
    before reading any of them (60,000 one-character messages were 2.4 CPU-s of checking and rendering first)."""
    return int(settings.OPENJEV.max_input_tokens)


def messages_over(*, count: int) -> str | None:
    """Why a conversation of `count` messages is refused before they are read, or None."""
    limit = messages_max()
    if count <= limit:
        return None
    return (
        f"the conversation has {count} messages, more than the {limit} tokens of the input budget can hold "
        "(each message takes at least one)"
    )
