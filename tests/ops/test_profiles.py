"""The exact SGLang command line for each profile and override, and the refused flags."""

from __future__ import annotations

import pytest

from inference.errors import StartupError
from serving.config_reading import config_from_env
from serving.profiles import DEFAULT_PROFILE, PROFILES, profile_get, sglang_command
from serving.setting_rules import ConfigError

PY = "/opt/sglang/bin/python"


def command(name: str, **overrides: object) -> tuple[list[str], dict[str, str]]:
    options: dict[str, object] = {
        "profile": profile_get(name=name),
        "python": PY,
        "model": PROFILES[name].weights,
        "served_name": PROFILES[name].model,
        "context_length": 32768,
        "port": 30000,
        "host": "127.0.0.1",
        "frontend": "rust",
    }
    return sglang_command(**(options | overrides))  # type: ignore[arg-type]


def test_the_default_profile_is_qwen3_6_nvfp4_on_b200():
    profile = PROFILES[DEFAULT_PROFILE]
    assert (profile.model, profile.weights, profile.gpu, profile.hybrid) == (
        "Qwen/Qwen3.6-35B-A3B",
        "nvidia/Qwen3.6-35B-A3B-NVFP4",
        "B200",
        True,
    )


def test_default_profile_command_line():
    argv, env = command(DEFAULT_PROFILE)
    assert argv == [
        PY,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "nvidia/Qwen3.6-35B-A3B-NVFP4",
        "--served-model-name",
        "Qwen/Qwen3.6-35B-A3B",
        "--context-length",
        "32768",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--mamba-radix-cache-strategy",
        "extra_buffer",
        "--quantization",
        "modelopt_fp4",
        "--tp-size",
        "1",
        "--mem-fraction-static",
        "0.85",
        "--language-only",
    ]
    assert env == {"SGLANG_RUST_SERVER": "1"}


def test_the_vision_profile_is_the_default_with_its_vision_encoder():
    vision, _ = command("qwen3.6-35b-a3b-nvfp4-vision")
    default, _ = command(DEFAULT_PROFILE)
    assert vision == [arg for arg in default if arg != "--language-only"]
    assert [name for name, profile in PROFILES.items() if profile.vision] == ["qwen3.6-35b-a3b-nvfp4-vision"]


def test_a_launched_text_only_profile_refuses_images_at_startup():
    env = {"OPENJEV_BACKEND": "sglang", "OPENJEV_SGLANG_PYTHON": PY, "OPENJEV_MAX_IMAGES": "4"}
    with pytest.raises(ConfigError, match="text-only"):
        config_from_env(env)
    assert config_from_env({**env, "OPENJEV_PROFILE": "qwen3.6-35b-a3b-nvfp4-vision"}).max_images == 4


def test_fp8_profile_command_line():
    argv, _ = command("qwen3.6-35b-a3b-fp8", context_length=65536, port=31000, host="0.0.0.0")
    assert argv == [
        PY,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3.6-35B-A3B-FP8",
        "--served-model-name",
        "Qwen/Qwen3.6-35B-A3B",
        "--context-length",
        "65536",
        "--host",
        "0.0.0.0",
        "--port",
        "31000",
        "--mamba-radix-cache-strategy",
        "extra_buffer",
        "--tp-size",
        "1",
        "--mem-fraction-static",
        "0.85",
        "--language-only",
    ]


def test_small_gpu_profile_has_no_mamba_flag():
    argv, env = command("qwen3-30b-a3b-gptq-int4", frontend="python")
    assert argv == [
        PY,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-30B-A3B-GPTQ-Int4",
        "--served-model-name",
        "Qwen/Qwen3-30B-A3B",
        "--context-length",
        "32768",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tp-size",
        "1",
        "--mem-fraction-static",
        "0.85",
    ]
    assert not any("mamba" in arg for arg in argv)
    assert env == {"SGLANG_RUST_SERVER": "0"}


def test_extra_arguments_come_last_and_replace_the_profiles_value():
    argv, _ = command(
        DEFAULT_PROFILE,
        extra_args=[
            "--mem-fraction-static",
            "0.7",
            "--enable-metrics",
            "--tp-size=2",
            "--json-model-override-args",
            '{"a": 1}',
        ],
        revision="0123abc",
        served_name="jev-prod",
        model="/models/qwen",
    )
    assert argv == [
        PY,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/qwen",
        "--served-model-name",
        "jev-prod",
        "--context-length",
        "32768",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--revision",
        "0123abc",
        "--mamba-radix-cache-strategy",
        "extra_buffer",
        "--quantization",
        "modelopt_fp4",
        "--language-only",
        "--mem-fraction-static",
        "0.7",
        "--enable-metrics",
        "--tp-size=2",
        "--json-model-override-args",
        '{"a": 1}',
    ]


@pytest.mark.parametrize("flag", ["--disable-radix-cache", "--disable-radix-cache=true", "--disable-radix"])
def test_flags_that_disable_the_radix_cache_are_refused(flag):
    with pytest.raises(StartupError, match="radix"):
        command(DEFAULT_PROFILE, extra_args=["--enable-metrics", flag])


@pytest.mark.parametrize(
    "flag", ["--port", "--context-length=4096", "--served-model-name", "--model-path", "--mamba-radix-cache-strategy"]
)
def test_flags_the_launcher_owns_are_refused_as_extras(flag):
    with pytest.raises(StartupError, match="set by serve itself"):
        command(DEFAULT_PROFILE, extra_args=[flag, "1"])


def test_a_context_over_the_models_window_is_refused():
    with pytest.raises(StartupError, match="32768 tokens"):
        command("qwen3-30b-a3b-gptq-int4", context_length=65536)


def test_unknown_profile_fails_startup():
    with pytest.raises(StartupError, match="known profiles"):
        profile_get(name="llama")
    with pytest.raises(ConfigError, match="OPENJEV_PROFILE"):
        config_from_env({"OPENJEV_PROFILE": "llama"})


def test_the_profile_sets_the_served_model_for_sglang_deployments():
    small = config_from_env({"OPENJEV_BACKEND_URL": "http://gw:30000", "OPENJEV_PROFILE": "qwen3-30b-a3b-gptq-int4"})
    assert (small.model, small.served_model_name, small.model_release_date) == (
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-30B-A3B",
        "2025-04-29",
    )
    default = config_from_env({"OPENJEV_BACKEND_URL": "http://gw:30000"})
    assert (default.model, default.profile, default.model_path) == ("Qwen/Qwen3.6-35B-A3B", DEFAULT_PROFILE, None)
    assert config_from_env({"OPENJEV_BACKEND_URL": "http://gw", "OPENJEV_MODEL_PATH": "/w"}).model_path == "/w"


def test_profiles_are_plain_data():
    for profile in PROFILES.values():
        assert profile.max_context >= 32768 and profile.description and profile.gpu
        assert not any(arg.startswith("--disable-radix") for arg in profile.sglang_args)
