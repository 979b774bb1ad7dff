"""Where the SGLang deployment's tokenizer comes from: a directory, or the Hugging Face cache SGLang filled
on this machine; never the hub (the service runs offline)."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from inference.errors import StartupError
from inference.tokenizer import hf_tokenizer_resolve
from testbed.qwen3 import qwen3_dir, qwen3_tokenizer

MODEL = "Qwen/Qwen3.6-35B-A3B"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache of this test's own, and no way out: any request to the hub fails the test."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a request left the machine: {args}")

    monkeypatch.setattr(httpx.Client, "send", refuse)  # huggingface_hub's only HTTP client
    return cache


def _cached(cache: Path) -> None:
    """The files as SGLang's download leaves them: refs/main naming a snapshot that holds them."""
    repo = cache / ("models--" + MODEL.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(qwen3_dir() / name, snapshot / name)


TEXT = "Is the customer asking for money back?"


def test_a_directory_is_read_as_it_is(hub_cache: Path) -> None:
    assert hf_tokenizer_resolve(source=str(qwen3_dir()), revision=None).encode(TEXT) == qwen3_tokenizer().encode(TEXT)


def test_a_model_id_in_the_cache_sglang_filled_is_read_from_it_offline(hub_cache: Path) -> None:
    _cached(hub_cache)
    assert hf_tokenizer_resolve(source=MODEL, revision=None).encode(TEXT) == qwen3_tokenizer().encode(TEXT)


@pytest.mark.parametrize("source", [MODEL, "/no/such/tokenizer/directory"])
def test_a_tokenizer_neither_on_disk_nor_cached_stops_the_start_instead_of_downloading(
    hub_cache: Path, source: str
) -> None:
    with pytest.raises(StartupError, match="nothing is downloaded"):
        hf_tokenizer_resolve(source=source, revision=None)
