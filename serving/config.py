"""Every `OPENJEV_*` setting, declared in one place: one dataclass field a setting, carrying its default and the
rule its variable is read by, so the settings table (docs/settings.md) has one source. Reading them from the
environment is `serving.config_reading`; the parsers and checks a field names are `serving.setting_rules`."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inference.backends.base import BranchMode
from inference.gguf import BUNDLED, DEFAULT_SOURCE
from inference.scoring import ConfidenceFormula
from inference.tuning import MAX_PERMUTATIONS, TuningFile
from serving.profiles import DEFAULT_PROFILE, PROFILES
from serving.setting_rules import (
    IMAGE_URL_HOSTS_RULE,
    REDIS_RULE,
    bool_parse,
    choice_parser,
    fraction_check,
    image_url_hosts_parse,
    networks_parse,
    positive_check,
    profile_parse,
    redis_url_check,
    setting,
    setting_count,
    setting_seconds,
    setting_text,
    tuning_file_parse,
)

BASE_DIR = Path(__file__).resolve().parent.parent
JEV_ALIAS_PREFIX = "jev-"
"""Any model name with this prefix is an alias of the served language model, as in TypeSafe."""

BackendKind = Literal["local", "sglang"]
Frontend = Literal["rust", "python"]
StoreLevel = Literal["full", "metadata", "off"]
Debias = Literal["auto", "on", "off"]
LogFormat = Literal["text", "json"]


DEFAULT_SECRET_KEY = "openjev-insecure-development-key-set-OPENJEV_SECRET_KEY-in-production"
"""Public (it is in the source): fine for tests and `runserver`; `serve` refuses to run with it."""


@dataclass(frozen=True, kw_only=True)
class OpenJevConfig:
    """Every field is read from `OPENJEV_<FIELD NAME>` by the rule its `setting` gives; the fields marked
    `required` have defaults that depend on other settings (`config_from_env`)."""

    backend: BackendKind = setting(
        parse=choice_parser("local", "sglang"),
        rule="one of local, sglang",
        required=True,
        default_text="`local`, or `sglang` when `OPENJEV_BACKEND_URL` is set",
    )
    """`sglang` when OPENJEV_BACKEND_URL is set, else `local`."""
    backend_url: str | None = setting_text()
    backend_api_key: str | None = setting_text()
    branch_mode: BranchMode = setting(
        default="batched", parse=choice_parser("batched", "parallel"), rule="batched or parallel"
    )
    model: str = setting_text(
        required=True,
        default_text=f"the profile's model on SGLang (`{PROFILES[DEFAULT_PROFILE].model}`), else the bundled "
        f"model's repository (`{BUNDLED[DEFAULT_SOURCE].repo}`) or the `.gguf` file's stem",
    )
    """The profile's model on SGLang, else the bundled model's repository or the .gguf file's stem."""
    served_model_name: str = setting_text(required=True, default_text="`OPENJEV_MODEL`'s value")
    """The model's name, unless set."""
    revision: str | None = setting_text()
    model_alias: str = setting_text(default="jev-latest")
    model_release_date: str = setting_text(
        required=True, default_text="the bundled model's or the profile's release date, else `unknown`"
    )
    """What is known of the model's release (`_release_date`)."""
    local_model: str = setting_text(default=DEFAULT_SOURCE)
    local_context: int = setting_count(default=8192)
    model_cache: Path = setting(default=BASE_DIR / ".cache" / "models", parse=Path)
    tokenizer: str | None = setting_text()
    frontend: Frontend = setting(default="rust", parse=choice_parser("rust", "python"), rule="rust or python")
    sglang_python: str | None = setting_text()
    profile: str = setting(default=DEFAULT_PROFILE, parse=profile_parse, rule=f"one of {', '.join(PROFILES)}")
    api_key: str | None = setting_text()
    require_api_key: bool = setting(default=False, parse=bool_parse, rule="true or false")
    max_body_bytes: int = setting_count(default=2 * 1024 * 1024)
    max_questions: int = setting_count(default=64)
    max_decisions_questions: int = setting_count(default=400)
    """Questions in one `POST /v1/decisions` (OpenAI's Decisions API takes up to 400)."""
    max_answers: int = setting(default=255, parse=int, check=lambda v: 2 <= v <= 702, rule="an integer from 2 to 702")
    max_input_tokens: int = setting_count(default=32768)
    max_total_input_tokens: int = setting_count(default=262144)
    max_concurrent_requests: int = setting_count(default=32)
    """Evaluations one process runs at once before it answers 529: at 16, Poisson arrivals at 200/s on one worker
    (about 35 ms each on a GPU-like backend) met the limit in bursts (5 of 2,063 answered 529, 2026-12-06)."""
    max_concurrent_branches: int = setting_count(default=64)
    request_timeout: float = setting_seconds(default=120.0)
    temperature: float | None = setting(
        parse=float,
        check=positive_check,
        rule="a positive number",
        default_text="unset: the served model's tuning, per question shape (`1` for a model never measured)",
    )
    """None: the served model's fitted default (bench/quality.py), 1.0 for models never measured."""
    confidence: ConfidenceFormula = setting(
        default="entropy", parse=choice_parser("entropy", "typesafe"), rule="entropy or typesafe"
    )
    store_evaluations: StoreLevel = setting(
        default="full", parse=choice_parser("full", "metadata", "off"), rule="full, metadata or off"
    )
    database_url: str = setting_text(default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
    database_timeout: float = setting_seconds(default=5.0)
    """Seconds the service's own statements may run (PostgreSQL's `statement_timeout` on its background threads)
    and a SQLite connection waits for the database's lock (its busy timeout); connecting to PostgreSQL gets a
    third of it, at least 2 s (`openjev_site.databases`)."""
    spool_dir: Path = setting(default=BASE_DIR / ".cache" / "spool", parse=Path)
    """Where answered evaluations are made durable before their answer leaves (`audit.storage.spool`): a local disk."""
    spool_max_bytes: int = setting_count(default=1024 * 1024 * 1024)
    """Bytes the spool may hold while the database is away."""
    spool_full: Literal["refuse", "answer"] = setting(
        default="refuse", parse=choice_parser("refuse", "answer"), rule="refuse or answer"
    )
    """A full spool: `refuse` new evaluations (503), or `answer` them unstored (counted)."""
    debug: bool = setting(default=False, parse=bool_parse, rule="true or false")
    secret_key: str = setting_text(default=DEFAULT_SECRET_KEY)
    allowed_hosts: tuple[str, ...] = setting(
        default=("*",), parse=lambda raw: tuple(h.strip() for h in raw.split(",") if h.strip())
    )
    force_script_name: str | None = setting(
        parse=lambda raw: raw.rstrip("/") or None,
        check=lambda v: v is None or v.startswith("/"),
        rule="a path starting with /, e.g. /jev",
    )
    """A gateway that mounts the API under a path (e.g. /jev) and cannot pass the ASGI root_path."""
    model_path: str | None = setting_text()
    """Checkpoint a launched SGLang loads (`--model-path`); None: the profile's weights."""
    max_classify_inputs: int = setting_count(default=64)
    """Texts in one `POST /v1/classify` (all run under one admission)."""
    debias: Debias = setting(default="auto", parse=choice_parser("auto", "on", "off"), rule="auto, on or off")
    """`on`, `off`, or `auto`: what bench/quality.py measured best for the served model."""
    permutations: int | None = setting(
        parse=int,
        check=lambda v: 1 <= v <= MAX_PERMUTATIONS,
        rule=f"an integer from 1 to {MAX_PERMUTATIONS}",
        default_text="unset: the served model's tuning, per question shape (`1` for a model never measured)",
    )
    """Option orders averaged per question (cyclic shifts), every shape; None: the tuning's (1 unless measured)."""
    tuning_file: TuningFile | None = setting(parse=tuning_file_parse)
    """A `bench/quality.py --write-tuning` file, read at startup: its per-shape temperature, debiasing and option
    orders replace the built-in tuning (`inference/tuning.py`) of the model it names; the settings above still win."""
    label_mass_warn: float = setting(default=0.5, parse=float, check=fraction_check, rule="a number from 0 to 1")
    """A warning is logged for an answer whose label mass is under this."""
    refusal_label_mass: float = setting(default=0.0, parse=float, check=fraction_check, rule="a number from 0 to 1")
    """`POST /v1/decisions` answers a question whose label mass is under this as a refusal; 0: never."""
    header_timeout: float = setting_seconds(default=20.0)
    """Seconds a connection has to deliver a request's headers (`serve`'s uvicorn; daphne: per read)."""
    body_timeout: float = setting_seconds(default=60.0)
    """Seconds a request has to deliver its whole body once the headers are in (the body reader)."""
    max_images: int = setting(default=0, parse=int, check=lambda v: 0 <= v <= 256, rule="an integer from 0 to 256")
    """Images one `POST /v1/systemone` may carry; 0 refuses images (text-only deployments)."""
    max_image_bytes: int = setting_count(
        required=True, default_text="`1048576`, or `OPENJEV_MAX_BODY_BYTES` if that is lower"
    )
    """Bytes of one image file (decoded), at most the body limit (1 MiB, or the body limit if lower)."""
    max_request_image_bytes: int = setting_count(required=True, default_text="`OPENJEV_MAX_BODY_BYTES`")
    """Bytes of all images of one request (decoded), at most the body limit (the body limit)."""
    image_url_hosts: tuple[str, ...] = setting(
        default=(),
        parse=image_url_hosts_parse,
        rule=IMAGE_URL_HOSTS_RULE,
        default_text="— (none: no image URL is fetched for a client)",
    )
    """Hosts whose https image URLs the service fetches for a client and sends on as bytes (`api.checking.image_fetch`:
    every resolved address public, no redirect, bounded in bytes and time); empty: hosted image URLs are refused on
    `/v1/decisions` and System One's go to the backend as sent."""
    image_fetch_timeout: float = setting_seconds(default=10.0)
    """Seconds the hosted images of one request have, together, to be resolved, connected to and read in full."""
    channel_layer_url: str | None = setting(parse=str, check=redis_url_check, rule=REDIS_RULE)
    """`redis://...`: the channel layer several processes share (the live dashboard); None: in-memory."""
    stream_max_in_flight: int = setting_count(default=16)
    """Evaluations in flight on one `/v1/systemone/stream` socket."""
    stream_idle_timeout: float = setting_seconds(default=300.0)
    """Seconds a stream socket may stay silent, with nothing in flight, before it is closed."""
    stream_auth_timeout: float = setting_seconds(default=5.0)
    """Seconds a `/v1/systemone/stream` socket has to authenticate once open (auth on) before it is closed (4401)."""
    max_websockets: int = setting_count(default=1000)
    """API WebSockets open at once in one process (the stream, and paths without a route); one more is closed at
    once (4529). The admin dashboard's live sockets are counted apart, so API sockets never starve it."""
    max_websockets_per_key: int = setting_count(required=True, default_text="a tenth of `OPENJEV_MAX_WEBSOCKETS`")
    """Stream sockets one API key (or one client address, while auth is off or before the key is known) may
    hold at once in one process; one more is closed (4429). Default: a tenth of `max_websockets`."""
    admin_login_failures: int = setting_count(default=5)
    """Failed admin sign-ins of one username from one address before that pair is locked out (django-axes)."""
    admin_lockout_seconds: float = setting_seconds(default=900.0)
    """How long a lockout lasts unless an administrator clears it (Axes > Access attempts)."""
    calibration: bool = setting(
        default=True, parse=lambda raw: choice_parser("on", "off")(raw) == "on", rule="on or off"
    )
    """Apply the active per-question calibrations (`OPENJEV_CALIBRATION=on|off`)."""
    calibration_min_labels: int = setting(
        default=50, parse=int, check=lambda v: v >= 10, rule="an integer of at least 10"
    )
    """Labelled answers a calibration fit needs at least (its held-out split is 30 % of them)."""
    redis_url: str | None = setting(parse=str, check=redis_url_check, rule=REDIS_RULE)
    """`redis://...`: where every process and replica counts the per-key limits; None: each process alone."""
    key_requests_per_minute: int | None = setting_count()
    """Evaluating requests per minute per API key (or client address without keys), unless the key sets its
    own; None: unlimited."""
    key_tokens_per_minute: int | None = setting_count()
    """Input tokens per minute per API key (or client address), unless the key sets its own; None: unlimited."""
    key_concurrency: int | None = setting_count()
    """Evaluations in flight at once per API key (or client address), unless the key sets its own."""
    rate_limit_failure: Literal["open", "closed"] = setting(
        default="open", parse=choice_parser("open", "closed"), rule="open or closed"
    )
    """With Redis unreachable: `open` serves unlimited (logged once per outage), `closed` answers 429; for every
    throttle, the wrong-key one included."""
    rate_limit_timeout: float = setting_seconds(default=0.5)
    """Seconds Redis has to answer a count before it is treated as down (its failure policy applies)."""
    bad_keys_per_minute: int = setting_count(default=30)
    """Wrong Bearer keys one client address may send per minute before it gets 429 (before any key lookup)."""
    metrics_token: str | None = setting_text()
    """`GET /metrics` needs `Authorization: Bearer <this>`; unset: /metrics is open (keep it off the internet)."""
    metrics_per_key: bool = setting(
        default=False, parse=lambda raw: choice_parser("on", "off")(raw) == "on", rule="on or off"
    )
    """`on`: per-key series (`openjev_key_*`) labelled by each key's public label; one series per key and route."""
    log_format: LogFormat = setting(default="text", parse=choice_parser("text", "json"), rule="text or json")
    """`json`: one JSON object per log line (time, level, logger, message, request id, trace id, key, route)."""
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = setting(
        default=(),
        parse=networks_parse,
        rule="comma-separated IP addresses or CIDR networks",
        default_text="— (none, loopback included)",
    )
    """Peers whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed (`serving.addresses`); none by default,
    loopback included: the client address is then always the connecting peer's."""
    https: bool = setting(default=False, parse=bool_parse, rule="true or false")
    """`true`: the service is reached over https only, TLS ended at a trusted proxy: the admin's cookies are
    `Secure`, the admin and the docs redirect http to https and send HSTS (`openjev_site.settings`)."""

    task_engine: Literal["database", "celery"] = setting(
        default="database", parse=choice_parser("database", "celery"), rule="database or celery"
    )
    """Where batch work is queued (Django's tasks API): `database` (django-tasks-db; `serve` runs a worker beside
    the API) or `celery` (Celery workers on `OPENJEV_CELERY_BROKER_URL`, any number, on any machine)."""
    celery_broker_url: str | None = setting(parse=str, check=redis_url_check, rule=REDIS_RULE)
    """`redis://...`: the Celery broker of `OPENJEV_TASK_ENGINE=celery`; unset: `OPENJEV_REDIS_URL`."""
    batch_worker: bool = setting(
        default=True, parse=lambda raw: choice_parser("on", "off")(raw) == "on", rule="on or off"
    )
    """With the `database` engine, `serve` runs a batch worker beside the API (`off`: run `manage.py batch_worker`)."""
    batch_max_lines: int = setting_count(default=50_000)
    """Lines one batch input file may hold (OpenAI's limit)."""
    batch_max_file_bytes: int = setting_count(default=200 * 1024 * 1024)
    """Bytes one uploaded batch input file may have (OpenAI's limit: 200 MB)."""
    batch_concurrency: int = setting_count(default=16)
    """Lines one batch worker evaluates at once: the share of backend concurrency batches take, so interactive
    requests keep the rest (`OPENJEV_MAX_CONCURRENT_BRANCHES`); at most `OPENJEV_MAX_CONCURRENT_REQUESTS`."""
    batch_priority: int | None = setting(parse=int, rule="an integer")
    """SGLang `priority` of batch lines' backend calls, every other call then sending 0 (SGLang with
    `--enable-priority-scheduling`, where a lower value is served later by default); unset: none."""
    batch_chunk_lines: int = setting_count(default=1000)
    """Lines one batch task answers before it ends (more tasks spread a batch over more workers)."""
    batch_lease_seconds: float = setting_seconds(default=300.0)
    """How long a worker's claim on lines holds: a worker killed mid-chunk leaves its lines to others after it."""
    batch_retention_days: int = setting_count(default=30)
    """Days a batch and its files are kept after the batch ends (`manage.py prune_batches` deletes the rest)."""

    @property
    def auth_required(self) -> bool:
        return bool(self.api_key) or self.require_api_key

    @property
    def batch_max_line_bytes(self) -> int:
        """A batch line's size limit: a body the route takes (`OPENJEV_MAX_BODY_BYTES`) and 64 KiB of envelope."""
        return self.max_body_bytes + 65_536

    @property
    def language_model_names(self) -> frozenset[str]:
        """The names `model` may give for the language model (besides any `jev-*` alias)."""
        return frozenset({self.model_alias, self.model, self.served_model_name})

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in a log, a stored error or a client's answer."""
        public = DEFAULT_SECRET_KEY
        values = (self.api_key, self.backend_api_key, self.secret_key, self.metrics_token)
        return tuple(v for v in values if v and v != public)


def language_model_named(*, name: str, names: frozenset[str]) -> bool:
    """Whether `name` means the served language model: one of its `names`, or any `jev-*` alias (so a
    classifier may not take such a name, and `POST /v1/systemone` accepts it)."""
    return name in names or name.startswith(JEV_ALIAS_PREFIX)
