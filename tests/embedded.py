"""Where the embedded-model tests keep the assembled GGUF files: the user cache, shared by every test
module, so each bundled model is assembled (hundreds of MB) once per machine, not once per module."""

from __future__ import annotations

import os
from pathlib import Path


def models_cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "openjev" / "models"
