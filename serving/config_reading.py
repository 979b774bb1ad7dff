"""The configuration read from the environment: each `OPENJEV_*` variable by its field's rule, the defaults that
depend on other settings, and the combinations the service cannot run with.

A typo in a deployment's environment should stop the process at startup with a message naming the
variable, not surface as a 500 on the first request. Django's settings module holds the result as
`settings.OPENJEV`, read once per process from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from functools import partial
from pathlib import Path
from typing import Any

from inference.gguf import BUNDLED
from serving.config import OpenJevConfig
from serving.profiles import PROFILES
from serving.redaction import REDACTED, text_redact
from serving.setting_rules import Check, ConfigError, SettingRule

SETTINGS = {f.name: f for f in fields(OpenJevConfig)}
"""Each setting's field by name, for the reading to find its rule and static default."""


def _get[T](
    env: Mapping[str, str],
    name: str,
    default: T,
    parse: Callable[[str], T],
    check: Callable[[T], bool],
    rule: str,
) -> T:
    raw = env.get(f"OPENJEV_{name}")
    if raw is None or raw == "":
        return default
    try:
        value = parse(raw.strip())
    except ConfigError:
        raise  # a parser that names what is wrong (a tuning file's field) says more than the rule
    except ValueError:
        raise ConfigError(f"OPENJEV_{name}={raw!r} is not valid{': ' + rule if rule else ''}") from None
    if not check(value):
        raise ConfigError(f"OPENJEV_{name}={raw!r} is not valid: {rule}")
    return value


def setting_read(
    *, env: Mapping[str, str], name: str, default: Any = MISSING, check: Check | None = None, rule: str | None = None
) -> Any:
    """Field `name` from `OPENJEV_<NAME>` by its table rule; `default`, `check` and `rule` stand in for the
    table's where they depend on other settings."""
    spec = SETTINGS[name]
    rules: SettingRule = spec.metadata["setting"]
    return _get(
        env,
        name.upper(),
        spec.default if default is MISSING else default,
        rules.parse,
        rules.check if check is None else check,
        rules.rule if rule is None else rule,
    )


def config_from_env(env: Mapping[str, str] | None = None) -> OpenJevConfig:
    environ: Mapping[str, str] = os.environ if env is None else env
    read = partial(setting_read, env=environ)
    derived = _derived_read(read=read)
    config = OpenJevConfig(**derived, **{name: read(name=name) for name in SETTINGS if name not in derived})
    _combinations_check(config=config)
    return config


def _derived_read(*, read: Callable[..., Any]) -> dict[str, Any]:
    """The settings whose default or bound depends on another setting's value, read in the order they depend
    on each other (a backend without its URL stops the start before the model is looked up)."""
    backend_url = read(name="backend_url")
    backend = read(name="backend", default="sglang" if backend_url else "local")
    if backend == "sglang" and not backend_url and not read(name="sglang_python"):
        raise ConfigError("OPENJEV_BACKEND=sglang needs OPENJEV_BACKEND_URL (or OPENJEV_SGLANG_PYTHON to launch one)")
    local_model = read(name="local_model")
    bundled = BUNDLED.get(local_model)
    if bundled is None and not local_model.endswith(".gguf"):
        raise ConfigError(f"OPENJEV_LOCAL_MODEL={local_model!r}: use one of {', '.join(BUNDLED)} or a .gguf path")
    profile = read(name="profile")
    model = read(
        name="model",
        default=PROFILES[profile].model if backend == "sglang" else bundled.repo if bundled else Path(local_model).stem,
    )
    max_body_bytes = read(name="max_body_bytes")
    max_websockets = read(name="max_websockets")
    within_body = f"a positive integer up to OPENJEV_MAX_BODY_BYTES ({max_body_bytes})"
    fits_body: Check = lambda v: 0 < v <= max_body_bytes  # noqa: E731
    return {
        "backend": backend,
        "backend_url": backend_url,
        "local_model": local_model,
        "profile": profile,
        "model": model,
        "max_body_bytes": max_body_bytes,
        "served_model_name": read(name="served_model_name", default=model),
        "model_release_date": read(name="model_release_date", default=_release_date(model=model)),
        "max_image_bytes": read(
            name="max_image_bytes", default=min(1 << 20, max_body_bytes), check=fits_body, rule=within_body
        ),
        "max_request_image_bytes": read(
            name="max_request_image_bytes", default=max_body_bytes, check=fits_body, rule=within_body
        ),
        "max_websockets": max_websockets,
        "max_websockets_per_key": read(
            name="max_websockets_per_key",
            default=max(1, max_websockets // 10),
            check=lambda v: 0 < v <= max_websockets,
            rule=f"a positive integer up to OPENJEV_MAX_WEBSOCKETS ({max_websockets})",
        ),
    }


def _combinations_check(*, config: OpenJevConfig) -> None:
    """Settings each valid alone that the service cannot run with together, named in the error."""
    profile = config.profile
    if config.max_images and config.backend == "sglang" and config.sglang_python and not PROFILES[profile].vision:
        raise ConfigError(
            f"OPENJEV_MAX_IMAGES={config.max_images}, but the SGLang profile {profile!r} is text-only "
            f"(--language-only); use one of {', '.join(n for n, p in PROFILES.items() if p.vision)}"
        )
    if config.max_input_tokens > config.max_total_input_tokens:
        raise ConfigError("OPENJEV_MAX_INPUT_TOKENS must not exceed OPENJEV_MAX_TOTAL_INPUT_TOKENS")
    if config.https and not config.trusted_proxies:
        raise ConfigError(
            "OPENJEV_HTTPS=true needs OPENJEV_TRUSTED_PROXIES: the https scheme is the proxy's X-Forwarded-Proto"
        )
    if config.batch_concurrency > config.max_concurrent_requests:
        raise ConfigError(
            "OPENJEV_BATCH_CONCURRENCY must not exceed OPENJEV_MAX_CONCURRENT_REQUESTS: a batch worker admits that "
            "many evaluations at once, as the API does (raise both on a machine that works batches alone)"
        )
    if config.task_engine == "celery" and not (config.celery_broker_url or config.redis_url):
        raise ConfigError("OPENJEV_TASK_ENGINE=celery needs OPENJEV_CELERY_BROKER_URL (or OPENJEV_REDIS_URL)")


def _release_date(*, model: str) -> str:
    """What is known of `model`'s release: a bundled model's or a profile's date, else `unknown`."""
    dates = [
        *(b.release_date for b in BUNDLED.values() if b.repo == model),
        *(p.release_date for p in PROFILES.values() if p.model == model),
    ]
    return next((date for date in dates if date), "unknown")


def config_describe(config: OpenJevConfig) -> dict[str, Any]:
    """The configuration without secrets, for logs and the startup banner: the secret settings
    masked, and credentials inside any other value (a backend or database URL) redacted."""
    hidden = {"backend_api_key", "api_key", "secret_key", "metrics_token"}
    return {
        k: (REDACTED if k in hidden and v else text_redact(text=v, secrets=config.secrets) if isinstance(v, str) else v)
        for k, v in config.__dict__.items()
    }
