"""How one `OPENJEV_*` variable is read: the parsers and checks a setting names, and `setting`, which makes a
config field of a default and its rule.

Kept apart from the settings' declarations (`serving.config`) so that table reads as one field a setting, and
from the reading (`serving.config_reading`), which applies these rules to an environment.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.tuning import TuningFile, TuningFileError, tuning_file_load
from serving.profiles import PROFILES


class ConfigError(ValueError):
    """An OPENJEV_* variable has a value the service cannot run with."""


Parse = Callable[[str], Any]
Check = Callable[[Any], bool]


def anything_accept(_: object) -> bool:
    """The check of a setting whose parser already refuses every value it cannot run with."""
    return True


def bool_parse(raw: str) -> bool:
    """The words a boolean variable accepts, so `on`, `yes` and `1` mean the same as `true`."""
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)


def choice_parser[T: str](*allowed: T) -> Callable[[str], T]:
    """A parser that takes one of `allowed`, in any case, so the field's type is the `Literal` of them."""

    def parse(raw: str) -> T:
        for value in allowed:
            if value == raw.lower():
                return value
        raise ValueError(raw)

    return parse


def profile_parse(raw: str) -> str:
    """A launch profile's name, one `serving.profiles` defines (a typo would launch nothing)."""
    if raw not in PROFILES:
        raise ValueError(raw)
    return raw


def tuning_file_parse(raw: str) -> TuningFile:
    """The tuning file read at startup, so a wrong field stops the start named, not the first request."""
    try:
        return tuning_file_load(path=Path(raw))
    except TuningFileError as exc:
        raise ConfigError(f"OPENJEV_TUNING_FILE: {exc}") from None


def positive_check(value: float) -> bool:
    return value > 0


def fraction_check(value: float) -> bool:
    return 0 <= value <= 1


def redis_url_check(value: str) -> bool:
    return value.startswith(("redis://", "rediss://", "unix://"))


REDIS_RULE = "a redis://, rediss:// or unix:// URL of a Redis server"


def networks_parse(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated IP addresses and CIDR networks; one that is neither stops the start, named (a typo
    here would silently trust nobody, or the wrong hosts)."""
    networks = []
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry))
        except ValueError as exc:
            raise ConfigError(
                f"OPENJEV_TRUSTED_PROXIES: {entry[:60]!r} is not an IP address or a CIDR network ({exc})"
            ) from None
    return tuple(networks)


HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*")
"""A DNS host name, lowercase ASCII (an internationalised name in its `xn--` form)."""
IMAGE_URL_HOSTS_RULE = "comma-separated host names, each exact (images.example.com) or a suffix (*.example.com)"


def image_url_hosts_parse(raw: str) -> tuple[str, ...]:
    """Comma-separated host names (ASCII: an internationalised name in its `xn--` form), lowercased, each exact or
    `*.` and a domain; one that is neither stops the start, named (`*` alone would let clients name any host)."""
    hosts = []
    for entry in (part.strip().lower().rstrip(".") for part in raw.split(",")):
        if not entry:
            continue
        if not HOST_NAME.fullmatch(entry.removeprefix("*.")):
            raise ConfigError(
                f"OPENJEV_IMAGE_URL_HOSTS: {entry[:60]!r} is not a host name or *.domain ({IMAGE_URL_HOSTS_RULE})"
            )
        hosts.append(entry)
    return tuple(dict.fromkeys(hosts))


@dataclass(frozen=True)
class SettingRule:
    """How one field is read from its `OPENJEV_<FIELD>` variable: parsed, checked, and the rule an error quotes."""

    parse: Parse
    check: Check = anything_accept
    rule: str = ""
    default_text: str = ""
    """The default as the README's settings table states it, where a value cannot: derived by
    `config_from_env` from other settings, or what unset means (tests/ops/test_settings_table.py)."""


def setting[T](
    *,
    default: T | None = None,
    parse: Callable[[str], T],
    check: Callable[[T], bool] = anything_accept,
    rule: str = "",
    required: bool = False,
    default_text: str = "",
) -> T:
    """A config field and how its variable is read, in one place: the dataclass is the settings table.
    `required`: no static default (config_from_env computes it from other settings, and `default_text`
    says how)."""
    metadata = {"setting": SettingRule(parse=parse, check=check, rule=rule, default_text=default_text)}
    if required:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)  # type: ignore[return-value]  # None: an optional field's


def setting_text(*, default: str | None = None, required: bool = False, default_text: str = "") -> Any:
    return setting(default=default, parse=str, required=required, default_text=default_text)


def setting_count(*, default: int | None = None, required: bool = False, default_text: str = "") -> Any:
    return setting(
        default=default,
        parse=int,
        check=positive_check,
        rule="a positive integer",
        required=required,
        default_text=default_text,
    )


def setting_seconds(*, default: float) -> float:
    return setting(default=default, parse=float, check=positive_check, rule="a positive number of seconds")
