"""`modal_app.py` imports with `modal` installed, and declares the app, function, volume, image and scaling
it documents. No Modal account is needed: defining an app talks to nobody. Skipped where `modal` (an
optional extra) is not installed."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ops.packages import embedded_only_packages, sync_packages

modal = pytest.importorskip("modal")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    """modal_app imported fresh, with the arguments of its decorators recorded (the real ones still run)."""
    calls: dict[str, Any] = {}

    def recording(name: str, original: Any) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls[name] = kwargs | ({"args": args[1:]} if name.startswith("App.") else {"args": args})
            return original(*args, **kwargs)

        return record

    monkeypatch.setattr(modal.App, "function", recording("App.function", modal.App.function))
    monkeypatch.setattr(modal.App, "local_entrypoint", recording("App.local_entrypoint", modal.App.local_entrypoint))
    monkeypatch.setattr(modal, "web_server", recording("web_server", modal.web_server))
    monkeypatch.setattr(modal, "concurrent", recording("concurrent", modal.concurrent))
    monkeypatch.setattr(modal.Image, "uv_sync", recording("Image.uv_sync", modal.Image.uv_sync))
    monkeypatch.delenv("OPENJEV_MODAL_SECRETS", raising=False)
    monkeypatch.delenv("OPENJEV_MODAL_MAX_CONTAINERS", raising=False)
    spec = importlib.util.spec_from_file_location("modal_app_under_test", ROOT / "modal_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module, calls


def test_the_app_and_its_objects(loaded):
    module, _ = loaded
    assert isinstance(module.app, modal.App) and module.app.name == "openjev"
    assert isinstance(module.serve, modal.Function)
    assert isinstance(module.volume, modal.Volume)
    assert isinstance(module.image, modal.Image)


def test_one_b200_per_container_with_the_model_cache_on_a_volume(loaded):
    module, calls = loaded
    function = calls["App.function"]
    assert function["gpu"] == "B200" and function["image"] is module.image
    assert function["volumes"] == {"/cache": module.volume}
    assert module.VOLUME_NAME == "openjev-model-cache"
    for name in ("HF_HOME", "SGLANG_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert module.CACHE_ENV[name].startswith("/cache/")  # weights and compile caches persist


def test_autoscaling_and_scale_to_zero_after_five_minutes(loaded):
    _, calls = loaded
    function = calls["App.function"]
    assert function["min_containers"] == 0
    assert function["scaledown_window"] == 300
    assert function["max_containers"] == 4
    concurrency = calls["concurrent"]
    assert concurrency["target_inputs"] < concurrency["max_inputs"]


def test_each_container_serves_with_its_own_secret_key_unless_a_secret_sets_one(loaded):
    module, _ = loaded
    first, second = (module.serve_environment(environ={"PATH": "/bin"}) for _ in range(2))
    assert first["PATH"] == "/bin" and len(first["OPENJEV_SECRET_KEY"]) == 64
    assert first["OPENJEV_SECRET_KEY"] != second["OPENJEV_SECRET_KEY"]
    assert module.serve_environment(environ={"OPENJEV_SECRET_KEY": "shared"})["OPENJEV_SECRET_KEY"] == "shared"


def test_the_web_server_waits_for_the_model_and_serve_supervises_sglang(loaded):
    module, calls = loaded
    assert calls["web_server"]["port"] == 8000 and calls["web_server"]["startup_timeout"] >= 20 * 60
    command = module.serve_command()
    assert command[1:3] == ["manage.py", "serve"]
    assert command[command.index("--sglang-python") + 1] == module.SGLANG_PYTHON
    assert command[command.index("--host") + 1] == "0.0.0.0" and command[command.index("--port") + 1] == "8000"
    assert module.SERVE_ENV["OPENJEV_PROFILE"] == "qwen3.6-35b-a3b-nvfp4"
    assert module.SERVE_ENV["OPENJEV_MAX_CONCURRENT_REQUESTS"] == str(calls["concurrent"]["max_inputs"])


def test_modal_run_entry_smoke_tests_a_temporary_server(loaded):
    module, calls = loaded
    assert "App.local_entrypoint" in calls and callable(module.main)
    source = (ROOT / "modal_app.py").read_text()
    assert "smoke_run(" in source and "smoke-result.json" in source


def test_the_image_installs_no_model_package(loaded):
    _, calls = loaded
    sync = calls["Image.uv_sync"]
    assert sync["frozen"] is True
    args = [
        *(f"--group={g}" for g in sync.get("groups") or []),
        *(f"--extra={e}" for e in sync.get("extras") or []),
        *shlex.split(sync.get("extra_options", "")),
    ]
    assert "--no-dev" in args
    assert not sync_packages(args=args) & embedded_only_packages()
