"""Every `OPENJEV_*` variable, read and validated in one place: the app's typed configuration.

A typo in a deployment's environment should stop the process at startup with a message naming the
variable, not surface as a 500 on the first request. Django's settings module holds the result as
`settings.OPENJEV`, read once per process from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evaluations.redaction import REDACTED, text_redact
from inference.backends.sglang import BranchMode
from inference.gguf import BUNDLED, DEFAULT_SOURCE
from inference.scoring import ConfidenceFormula
from serving.profiles import DEFAULT_PROFILE, PROFILES

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = "Qwen/Qwen3.6-35B-A3B"
JEV_ALIAS_PREFIX = "jev-"
"""Any model name with this prefix is an alias of the served language model, as in TypeSafe."""

BackendKind = Literal["local", "sglang"]
Frontend = Literal["rust", "python"]
StoreLevel = Literal["full", "metadata", "off"]
Debias = Literal["auto", "on", "off"]


DEFAULT_SECRET_KEY = "openjev-insecure-development-key-set-OPENJEV_SECRET_KEY-in-production"
"""Public (it is in the source): fine for tests and `runserver`; `serve` refuses to run with it."""


class ConfigError(ValueError):
    """An OPENJEV_* variable has a value the service cannot run with."""


@dataclass(frozen=True)
class OpenJevConfig:
    backend: BackendKind
    backend_url: str | None
    backend_api_key: str | None
    branch_mode: BranchMode
    model: str
    served_model_name: str
    revision: str | None
    model_alias: str
    model_release_date: str
    local_model: str
    local_context: int
    model_cache: Path
    tokenizer: str | None
    frontend: Frontend
    sglang_python: str | None
    profile: str
    api_key: str | None
    require_api_key: bool
    max_body_bytes: int
    max_questions: int
    max_answers: int
    max_input_tokens: int
    max_total_input_tokens: int
    max_concurrent_requests: int
    max_concurrent_branches: int
    request_timeout: float
    temperature: float | None
    """None: the served model's fitted default (bench/quality.py), 1.0 for models never measured."""
    confidence: ConfidenceFormula
    store_evaluations: StoreLevel
    database_url: str
    debug: bool
    secret_key: str
    allowed_hosts: tuple[str, ...] = field(default=("*",))
    force_script_name: str | None = None
    model_path: str | None = None
    """Checkpoint a launched SGLang loads (`--model-path`); None: the profile's weights."""
    max_classify_inputs: int = 64
    """Texts in one `POST /v1/classify` (all run under one admission)."""
    debias: Debias = "auto"
    """`on`, `off`, or `auto`: what bench/quality.py measured best for the served model."""
    permutations: int = 1
    """Option orders averaged per question (cyclic shifts); 1 asks each question once."""
    label_mass_warn: float = 0.5
    """A warning is logged for an answer whose label mass is under this."""
    refusal_label_mass: float = 0.0
    """`POST /v1/decisions` answers a question whose label mass is under this as a refusal; 0: never."""
    header_timeout: float = 20.0
    """Seconds a connection has to deliver a request's headers (`serve`'s uvicorn; daphne: per read)."""
    body_timeout: float = 60.0
    """Seconds a request has to deliver its whole body once the headers are in (the body reader)."""
    max_images: int = 0
    """Images one `POST /v1/systemone` may carry; 0 refuses images (text-only deployments)."""
    max_image_bytes: int = 1 << 20
    """Bytes of one image file (decoded), at most the body limit."""
    max_request_image_bytes: int = 2 << 20
    """Bytes of all images of one request (decoded), at most the body limit."""
    channel_layer_url: str | None = None
    """`redis://...`: the channel layer several processes share (the live dashboard); None: in-memory."""
    stream_max_in_flight: int = 16
    """Evaluations in flight on one `/v1/systemone/stream` socket."""
    stream_idle_timeout: float = 300.0
    """Seconds a stream socket may stay silent, with nothing in flight, before it is closed."""
    calibration: bool = True
    """Apply the active per-question calibrations (`OPENJEV_CALIBRATION=on|off`)."""
    calibration_min_labels: int = 50
    """Labelled answers a calibration fit needs at least (its held-out split is 30 % of them)."""
    redis_url: str | None = None
    """`redis://...`: where every process and replica counts the per-key limits; None: each process alone."""
    key_requests_per_minute: int | None = None
    """Evaluating requests per minute per API key (or client address without keys), unless the key sets its
    own; None: unlimited."""
    key_tokens_per_minute: int | None = None
    """Input tokens per minute per API key (or client address), unless the key sets its own; None: unlimited."""
    key_concurrency: int | None = None
    """Evaluations in flight at once per API key (or client address), unless the key sets its own."""
    rate_limit_failure: Literal["open", "closed"] = "open"
    """With Redis unreachable: `open` serves unlimited (logged once per outage), `closed` answers 429."""
    bad_keys_per_minute: int = 30
    """Wrong Bearer keys one client address may send per minute before it gets 429 (before any key lookup)."""

    @property
    def auth_required(self) -> bool:
        return bool(self.api_key) or self.require_api_key

    @property
    def language_model_names(self) -> frozenset[str]:
        """The names `model` may give for the language model (besides any `jev-*` alias)."""
        return frozenset({self.model_alias, self.model, self.served_model_name})

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in a log, a stored error or a client's answer."""
        public = DEFAULT_SECRET_KEY
        return tuple(v for v in (self.api_key, self.backend_api_key, self.secret_key) if v and v != public)


def _get[T](
    env: Mapping[str, str],
    name: str,
    default: T,
    parse: Callable[[str], T],
    check: Callable[[T], bool] = lambda _: True,
    rule: str = "",
) -> T:
    raw = env.get(f"OPENJEV_{name}")
    if raw is None or raw == "":
        return default
    try:
        value = parse(raw.strip())
    except ValueError:
        raise ConfigError(f"OPENJEV_{name}={raw!r} is not valid{': ' + rule if rule else ''}") from None
    if not check(value):
        raise ConfigError(f"OPENJEV_{name}={raw!r} is not valid: {rule}")
    return value


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)


def _choice[T: str](*allowed: T) -> Callable[[str], T]:
    def parse(raw: str) -> T:
        for value in allowed:
            if value == raw.lower():
                return value
        raise ValueError(raw)

    return parse


def _known_profile(raw: str) -> str:
    if raw not in PROFILES:
        raise ValueError(raw)
    return raw


def _positive(value: float) -> bool:
    return value > 0


def config_from_env(env: Mapping[str, str] | None = None) -> OpenJevConfig:
    env = os.environ if env is None else env
    s = lambda name, default=None: _get(env, name, default, str)  # noqa: E731
    backend_url = s("BACKEND_URL")
    default_backend: BackendKind = "sglang" if backend_url else "local"
    backend = _get(env, "BACKEND", default_backend, _choice("local", "sglang"), rule="one of local, sglang")
    if backend == "sglang" and not backend_url and not s("SGLANG_PYTHON"):
        raise ConfigError("OPENJEV_BACKEND=sglang needs OPENJEV_BACKEND_URL (or OPENJEV_SGLANG_PYTHON to launch one)")
    local_model = s("LOCAL_MODEL", DEFAULT_SOURCE)
    bundled = BUNDLED.get(local_model)
    if bundled is None and not local_model.endswith(".gguf"):
        raise ConfigError(f"OPENJEV_LOCAL_MODEL={local_model!r}: use one of {', '.join(BUNDLED)} or a .gguf path")
    profile = _get(env, "PROFILE", DEFAULT_PROFILE, _known_profile, rule=f"one of {', '.join(PROFILES)}")
    model = s("MODEL", PROFILES[profile].model if backend == "sglang"
              else bundled.repo if bundled else Path(local_model).stem)
    max_answers = _get(env, "MAX_ANSWERS", 255, int, lambda v: 2 <= v <= 702, "an integer from 2 to 702")
    max_body_bytes = _get(env, "MAX_BODY_BYTES", 2 * 1024 * 1024, int, _positive, "a positive integer")
    within_body = f"a positive integer up to OPENJEV_MAX_BODY_BYTES ({max_body_bytes})"
    config = OpenJevConfig(
        backend=backend,
        backend_url=backend_url,
        backend_api_key=s("BACKEND_API_KEY"),
        branch_mode=_get(env, "BRANCH_MODE", "batched", _choice("batched", "parallel"), rule="batched or parallel"),
        model=model,
        served_model_name=s("SERVED_MODEL_NAME", model),
        revision=s("REVISION"),
        model_alias=s("MODEL_ALIAS", "jev-latest"),
        model_release_date=s("MODEL_RELEASE_DATE", _release_date(model=model)),
        local_model=local_model,
        local_context=_get(env, "LOCAL_CONTEXT", 8192, int, _positive, "a positive integer"),
        model_cache=Path(s("MODEL_CACHE", str(BASE_DIR / ".cache" / "models"))),
        tokenizer=s("TOKENIZER"),
        frontend=_get(env, "FRONTEND", "rust", _choice("rust", "python"), rule="rust or python"),
        sglang_python=s("SGLANG_PYTHON"),
        profile=profile,
        model_path=s("MODEL_PATH"),
        api_key=s("API_KEY"),
        require_api_key=_get(env, "REQUIRE_API_KEY", False, _bool, rule="true or false"),
        max_body_bytes=max_body_bytes,
        max_images=_get(env, "MAX_IMAGES", 0, int, lambda v: 0 <= v <= 256, "an integer from 0 to 256"),
        max_image_bytes=_get(env, "MAX_IMAGE_BYTES", min(1 << 20, max_body_bytes), int,
                             lambda v: 0 < v <= max_body_bytes, within_body),
        max_request_image_bytes=_get(env, "MAX_REQUEST_IMAGE_BYTES", max_body_bytes, int,
                                     lambda v: 0 < v <= max_body_bytes, within_body),
        max_questions=_get(env, "MAX_QUESTIONS", 64, int, _positive, "a positive integer"),
        max_answers=max_answers,
        max_classify_inputs=_get(env, "MAX_CLASSIFY_INPUTS", 64, int, _positive, "a positive integer"),
        max_input_tokens=_get(env, "MAX_INPUT_TOKENS", 32768, int, _positive, "a positive integer"),
        max_total_input_tokens=_get(env, "MAX_TOTAL_INPUT_TOKENS", 262144, int, _positive, "a positive integer"),
        max_concurrent_requests=_get(env, "MAX_CONCURRENT_REQUESTS", 16, int, _positive, "a positive integer"),
        max_concurrent_branches=_get(env, "MAX_CONCURRENT_BRANCHES", 64, int, _positive, "a positive integer"),
        request_timeout=_get(env, "REQUEST_TIMEOUT", 120.0, float, _positive, "a positive number of seconds"),
        header_timeout=_get(env, "HEADER_TIMEOUT", 20.0, float, _positive, "a positive number of seconds"),
        body_timeout=_get(env, "BODY_TIMEOUT", 60.0, float, _positive, "a positive number of seconds"),
        channel_layer_url=_get(env, "CHANNEL_LAYER_URL", None, str, lambda v: v is None or v.startswith(
            ("redis://", "rediss://", "unix://")), "a redis://, rediss:// or unix:// URL of a Redis server"),
        stream_max_in_flight=_get(env, "STREAM_MAX_IN_FLIGHT", 16, int, _positive, "a positive integer"),
        redis_url=_get(env, "REDIS_URL", OpenJevConfig.redis_url, str, lambda v: v is None or v.startswith(
            ("redis://", "rediss://", "unix://")), "a redis://, rediss:// or unix:// URL of a Redis server"),
        key_requests_per_minute=_get(env, "KEY_REQUESTS_PER_MINUTE", OpenJevConfig.key_requests_per_minute, int,
                                     lambda v: v is None or v > 0, "a positive integer"),
        key_tokens_per_minute=_get(env, "KEY_TOKENS_PER_MINUTE", OpenJevConfig.key_tokens_per_minute, int,
                                   lambda v: v is None or v > 0, "a positive integer"),
        key_concurrency=_get(env, "KEY_CONCURRENCY", OpenJevConfig.key_concurrency, int,
                             lambda v: v is None or v > 0, "a positive integer"),
        rate_limit_failure=_get(env, "RATE_LIMIT_FAILURE", OpenJevConfig.rate_limit_failure,
                                _choice("open", "closed"), rule="open or closed"),
        bad_keys_per_minute=_get(env, "BAD_KEYS_PER_MINUTE", OpenJevConfig.bad_keys_per_minute, int, _positive,
                                 "a positive integer"),
        stream_idle_timeout=_get(env, "STREAM_IDLE_TIMEOUT", 300.0, float, _positive, "a positive number of seconds"),
        temperature=_get(env, "TEMPERATURE", None, float, lambda v: v is None or v > 0, "a positive number"),
        confidence=_get(env, "CONFIDENCE", "entropy", _choice("entropy", "typesafe"), rule="entropy or typesafe"),
        debias=_get(env, "DEBIAS", "auto", _choice("auto", "on", "off"), rule="auto, on or off"),
        permutations=_get(env, "PERMUTATIONS", 1, int, lambda v: 1 <= v <= 16, "an integer from 1 to 16"),
        calibration=_get(env, "CALIBRATION", "on", _choice("on", "off"), rule="on or off") == "on",
        calibration_min_labels=_get(env, "CALIBRATION_MIN_LABELS", 50, int, lambda v: v >= 10,
                                    "an integer of at least 10"),
        label_mass_warn=_get(env, "LABEL_MASS_WARN", 0.5, float, lambda v: 0 <= v <= 1, "a number from 0 to 1"),
        refusal_label_mass=_get(env, "REFUSAL_LABEL_MASS", OpenJevConfig.refusal_label_mass, float,
                                lambda v: 0 <= v <= 1, "a number from 0 to 1"),
        store_evaluations=_get(
            env, "STORE_EVALUATIONS", "full", _choice("full", "metadata", "off"), rule="full, metadata or off"
        ),
        database_url=s("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        debug=_get(env, "DEBUG", False, _bool, rule="true or false"),
        secret_key=s("SECRET_KEY", DEFAULT_SECRET_KEY),
        allowed_hosts=tuple(h.strip() for h in s("ALLOWED_HOSTS", "*").split(",") if h.strip()),
        # A gateway that mounts the API under a path (e.g. /jev) and cannot pass the ASGI root_path.
        force_script_name=_get(
            env,
            "FORCE_SCRIPT_NAME",
            None,
            lambda v: v.rstrip("/") or None,
            lambda v: v is None or v.startswith("/"),
            "a path starting with /, e.g. /jev",
        ),
    )
    if config.max_images and config.backend == "sglang" and config.sglang_python and not PROFILES[profile].vision:
        raise ConfigError(f"OPENJEV_MAX_IMAGES={config.max_images}, but the SGLang profile {profile!r} is text-only "
                          f"(--language-only); use one of {', '.join(n for n, p in PROFILES.items() if p.vision)}")
    if config.max_input_tokens > config.max_total_input_tokens:
        raise ConfigError("OPENJEV_MAX_INPUT_TOKENS must not exceed OPENJEV_MAX_TOTAL_INPUT_TOKENS")
    return config


def _release_date(*, model: str) -> str:
    """What is known of `model`'s release: a bundled model's or a profile's date, else `unknown`."""
    dates = [*(b.release_date for b in BUNDLED.values() if b.repo == model),
             *(p.release_date for p in PROFILES.values() if p.model == model)]
    return next((date for date in dates if date), "unknown")


def language_model_named(*, name: str, names: frozenset[str]) -> bool:
    """Whether `name` means the served language model: one of its `names`, or any `jev-*` alias (so a
    classifier may not take such a name, and `POST /v1/systemone` accepts it)."""
    return name in names or name.startswith(JEV_ALIAS_PREFIX)


def config_describe(config: OpenJevConfig) -> dict[str, Any]:
    """The configuration without secrets, for logs and the startup banner: the secret settings
    masked, and credentials inside any other value (a backend or database URL) redacted."""
    hidden = {"backend_api_key", "api_key", "secret_key"}
    return {k: (REDACTED if k in hidden and v else text_redact(text=v, secrets=config.secrets) if isinstance(v, str)
                else v) for k, v in config.__dict__.items()}
