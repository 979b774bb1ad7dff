"""Model files for the llama.cpp backend: a local GGUF checked before loading, the bundled model assembled
from its part packages, verified and reused (tiny fake bundles: the real one is assembled elsewhere)."""

from __future__ import annotations

import hashlib
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from inference import gguf
from inference.backends.llamacpp import LlamaCppBackend
from inference.errors import StartupError
from inference.gguf import BundledModel, gguf_resolve

pytestmark = pytest.mark.embedded


def test_missing_custom_file_fails_startup(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="neither a bundled model"):
        gguf_resolve(source=str(tmp_path / "absent.gguf"), cache_dir=tmp_path)


def test_custom_file_must_be_gguf(tmp_path: Path) -> None:
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"<html>not found</html>")
    with pytest.raises(StartupError, match="not a GGUF file"):
        gguf_resolve(source=str(not_gguf), cache_dir=tmp_path)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))
    assert gguf_resolve(source=str(broken), cache_dir=tmp_path) == broken
    with pytest.raises(StartupError, match="cannot load"):
        LlamaCppBackend(model_path=broken)


def _fake_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: Sequence[bytes], sha256: str, modules: int | None = None
) -> BundledModel:
    """A tiny bundled model whose part modules are injected into sys.modules (never the real cache)."""
    model = BundledModel(
        name="tiny-test",
        repo="test/tiny",
        served_name="test/tiny",
        release_date="unknown",
        file_name="tiny.gguf",
        sha256=sha256,
        package="openjev-test-tiny-part{n}",
        version="1.0",
        parts=len(chunks),
    )
    for n, chunk in enumerate(chunks[:modules], start=1):
        part = tmp_path / f"part{n}.bin"
        part.write_bytes(chunk)
        module = types.ModuleType(model.part_module(n))
        module.get_part_path = lambda part=part: str(part)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, model.part_module(n), module)
    monkeypatch.setitem(gguf.BUNDLED, model.name, model)
    return model


def test_bundled_assembly_verifies_and_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [b"GGUF-first-", b"second-", b"third"]
    model = _fake_bundle(tmp_path, monkeypatch, chunks, hashlib.sha256(b"".join(chunks)).hexdigest())
    cache = tmp_path / "cache"
    path = gguf_resolve(source=model.name, cache_dir=cache)
    assert path.read_bytes() == b"".join(chunks)
    assert (cache / "tiny.gguf.sha256").is_file()

    def no_reassembly(**_: Any) -> None:
        raise AssertionError("a verified cache must be reused")

    monkeypatch.setattr(gguf, "_assemble", no_reassembly)
    assert gguf_resolve(source=model.name, cache_dir=cache) == path
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.sha256"]


def test_changed_cache_file_is_reassembled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [b"GGUF-a", b"-b"]
    model = _fake_bundle(tmp_path, monkeypatch, chunks, hashlib.sha256(b"".join(chunks)).hexdigest())
    cache = tmp_path / "cache"
    path = gguf_resolve(source=model.name, cache_dir=cache)
    path.write_bytes(b"GGUF-x-b")  # same size, different content: the sidecar no longer vouches for it
    assert gguf_resolve(source=model.name, cache_dir=cache).read_bytes() == b"GGUF-a-b"


def test_hash_mismatch_fails_startup_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_bundle(tmp_path, monkeypatch, [b"GGUF-a", b"-b"], "0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(StartupError, match="sha256"):
        gguf_resolve(source=model.name, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_missing_part_package_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_bundle(tmp_path, monkeypatch, [b"GGUF-a", b"-b", b"-c"], "0" * 64, modules=1)
    with pytest.raises(StartupError, match=r"openjev-test-tiny-part2==1\.0 openjev-test-tiny-part3==1\.0"):
        gguf_resolve(source=model.name, cache_dir=tmp_path / "cache")
