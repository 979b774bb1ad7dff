"""The settings module: every `OPENJEV_*` setting is one dataclass field that carries its default and how its
variable is read, and loading settings loads no backend. (docs/settings.md's table of them is held to this
module by tests/ops/test_settings_table.py.)"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import MISSING, fields

import pytest

from serving.config import BASE_DIR, OpenJevConfig
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError, SettingRule


def test_loading_settings_imports_no_backend_and_no_http_client():
    probe = (
        "import sys, serving.config_reading; "
        "print(' '.join(m for m in ('inference.backends.sglang', 'httpx', 'aiohttp') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=BASE_DIR, capture_output=True, text=True, timeout=60, check=True
    )
    assert loaded.stdout.strip() == ""


def test_every_field_is_read_by_a_rule_and_config_from_env_keeps_each_static_default():
    """`config_from_env` passes some defaults in itself (derived ones); none of them may shadow a field's own."""
    config = config_from_env({})
    static = [spec for spec in fields(OpenJevConfig) if spec.default is not MISSING]
    assert len(static) > 40
    for spec in fields(OpenJevConfig):
        assert isinstance(spec.metadata.get("setting"), SettingRule), spec.name
    for spec in static:
        assert getattr(config, spec.name) == spec.default, spec.name


def test_a_default_derived_from_other_settings_says_how_for_the_settings_reference():
    derived = [spec.name for spec in fields(OpenJevConfig) if spec.default is MISSING]
    assert "backend" in derived and "max_image_bytes" in derived
    for spec in fields(OpenJevConfig):
        if spec.default is MISSING:
            assert spec.metadata["setting"].default_text, f"{spec.name}: derived, with no default_text"


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("OPENJEV_HEADER_TIMEOUT", "0", "OPENJEV_HEADER_TIMEOUT='0' is not valid: a positive number of seconds"),
        ("OPENJEV_LABEL_MASS_WARN", "x", "OPENJEV_LABEL_MASS_WARN='x' is not valid: a number from 0 to 1"),
        ("OPENJEV_CALIBRATION", "maybe", "OPENJEV_CALIBRATION='maybe' is not valid: on or off"),
        (
            "OPENJEV_MAX_IMAGE_BYTES",
            "5000",
            "OPENJEV_MAX_IMAGE_BYTES='5000' is not valid: a positive integer up to OPENJEV_MAX_BODY_BYTES (4096)",
        ),
    ],
)
def test_a_bad_value_names_its_variable_and_the_rule(name, raw, message):
    with pytest.raises(ConfigError) as caught:
        config_from_env({"OPENJEV_MAX_BODY_BYTES": "4096", name: raw})
    assert str(caught.value) == message


def test_defaults_that_depend_on_other_settings_follow_them():
    small = config_from_env({"OPENJEV_MAX_BODY_BYTES": "4096"})
    assert small.max_image_bytes == small.max_request_image_bytes == 4096
    assert config_from_env({}).max_image_bytes == 1 << 20
    sglang = config_from_env({"OPENJEV_BACKEND_URL": "http://gw:30000", "OPENJEV_SERVED_MODEL_NAME": "served"})
    assert sglang.backend == "sglang" and sglang.served_model_name == "served" and sglang.model != "served"
