"""OpenJev on Modal: one SGLang + API container per B200, scaling with traffic and down to zero.

    modal run modal_app.py        # a temporary endpoint: start it, smoke-test it, save smoke-result.json
    modal deploy modal_app.py     # a persistent endpoint (prints its URL)

Each container runs `manage.py serve --sglang-python ...`: SGLang (the default NVFP4 profile) in
its own process group and the API in front of it on port 8000, the port opening only once the model
answers. If `serve` exits (SGLang died, or the engine could not start) the container exits too, so
Modal replaces it instead of routing requests to a dead backend.

The model weights (Hugging Face cache), SGLang's, Triton's and Torch Inductor's compile caches live
on a persistent Volume, so only the first container ever downloads ~20 GB and compiles kernels.

Settings (read where `modal run`/`modal deploy` runs, when the app is defined):
- `OPENJEV_MODAL_SECRETS`: comma-separated Modal Secret names to attach, e.g. one holding
  `OPENJEV_API_KEY` (turns on Bearer auth), `HF_TOKEN`, `OPENJEV_DATABASE_URL` (PostgreSQL) and
  `OPENJEV_STORE_EVALUATIONS=full`;
- `OPENJEV_MODAL_MAX_CONTAINERS` (default 4): the autoscaler's ceiling, i.e. GPUs;
- `OPENJEV_MODAL_SGLANG_IMAGE`: the SGLang image (a CUDA 13 build for Blackwell).

`modal` is an optional extra (`uv sync --extra modal`); the web app never imports this file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import modal

ROOT = Path(__file__).resolve().parent
APP_NAME = "openjev"
PROFILE = "qwen3.6-35b-a3b-nvfp4"
GPU = "B200"
SGLANG_IMAGE = os.environ.get("OPENJEV_MODAL_SGLANG_IMAGE", "lmsysorg/sglang:v0.5.23-cu130")
SGLANG_PYTHON = "/usr/local/bin/sglang-python"
"""The base image's interpreter (the one with SGLang), linked before our virtual environment joins PATH."""
APP_DIR = "/app"
VENV_PYTHON = "/.uv/.venv/bin/python"
"""Where `Image.uv_sync` puts the web app's locked environment."""
API_PORT = 8000

VOLUME_NAME = "openjev-model-cache"
CACHE_DIR = "/cache"
CACHE_ENV = {
    "HF_HOME": f"{CACHE_DIR}/huggingface",
    "SGLANG_CACHE_DIR": f"{CACHE_DIR}/sglang",
    "TRITON_CACHE_DIR": f"{CACHE_DIR}/triton",
    "TORCHINDUCTOR_CACHE_DIR": f"{CACHE_DIR}/inductor",
    "FLASHINFER_WORKSPACE_BASE": f"{CACHE_DIR}/flashinfer",
    "XDG_CACHE_HOME": f"{CACHE_DIR}/xdg",
}

MIN_CONTAINERS = 0  # scale to zero
MAX_CONTAINERS = int(os.environ.get("OPENJEV_MODAL_MAX_CONTAINERS", "4"))
SCALEDOWN_WINDOW = 5 * 60  # an idle container stops after 5 minutes
TARGET_INPUTS = 32  # concurrent requests per container the autoscaler aims for
MAX_INPUTS = 64  # and never exceeds (the API's own 529 limit is set to match)
STARTUP_TIMEOUT = 30 * 60  # first start: download the weights, compile, capture CUDA graphs
REQUEST_TIMEOUT = 10 * 60

SERVE_ENV = {
    "OPENJEV_PROFILE": PROFILE,
    "OPENJEV_MAX_CONCURRENT_REQUESTS": str(MAX_INPUTS),
    "OPENJEV_STORE_EVALUATIONS": "off",
    "OPENJEV_DATABASE_URL": "sqlite:////tmp/openjev.sqlite3",
    "OPENJEV_ALLOWED_HOSTS": "*",
    "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
    "PYTHONUNBUFFERED": "1",
}
IGNORED = [
    ".venv",
    ".git",
    ".cache",
    "**/__pycache__",
    "*.sqlite3*",
    ".staticfiles",
    "test-artifacts",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "smoke-result.json",
    "**/*.gguf",
]


def serve_command() -> list[str]:
    """The container's one command: the API, launching and supervising SGLang."""
    return [
        VENV_PYTHON,
        "manage.py",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        str(API_PORT),
        "--sglang-python",
        SGLANG_PYTHON,
        "--startup-timeout",
        str(STARTUP_TIMEOUT),
        "--migrate",
    ]


image = (
    modal.Image.from_registry(SGLANG_IMAGE)
    .entrypoint([])
    # Fails the build early on a base image without SGLang.
    .run_commands(f'python3 -c "import sglang" && ln -sf "$(command -v python3)" {SGLANG_PYTHON}')
    # The locked environment without the dev group or the `embedded` extra (llama.cpp and its ~1.1 GB models).
    .uv_sync(str(ROOT), frozen=True, extra_options="--no-dev")
    .env(CACHE_ENV | SERVE_ENV)
    .add_local_dir(ROOT, APP_DIR, ignore=IGNORED)
)
volume = modal.Volume.from_name(VOLUME_NAME, create_if_missing=True)
secrets = [
    modal.Secret.from_name(name.strip())
    for name in os.environ.get("OPENJEV_MODAL_SECRETS", "").split(",")
    if name.strip()
]
app = modal.App(APP_NAME)


def serve_environment(*, environ: Mapping[str, str]) -> dict[str, str]:
    """`serve`'s environment: the container's, plus a random `OPENJEV_SECRET_KEY` unless a Secret sets
    one (`serve` refuses the public development key). A per-container key loses nothing here: each
    container keeps its admin sessions in its own SQLite under /tmp."""
    env = dict(environ)
    if not env.get("OPENJEV_SECRET_KEY"):
        env["OPENJEV_SECRET_KEY"] = os.urandom(32).hex()
    return env


def _exit_with(process: subprocess.Popen[bytes]) -> None:
    """`serve` ended (SGLang died, startup failed, or a requested stop): take the container down with it."""
    code = process.wait()
    print(f"manage.py serve exited with status {code}: stopping this container", file=sys.stderr, flush=True)
    os._exit(code)


@app.function(
    image=image,
    gpu=GPU,
    volumes={CACHE_DIR: volume},
    secrets=secrets,
    min_containers=MIN_CONTAINERS,
    max_containers=MAX_CONTAINERS,
    scaledown_window=SCALEDOWN_WINDOW,
    timeout=REQUEST_TIMEOUT,
)
@modal.concurrent(max_inputs=MAX_INPUTS, target_inputs=TARGET_INPUTS)
@modal.web_server(port=API_PORT, startup_timeout=STARTUP_TIMEOUT)
def serve() -> None:
    """Start the API (which starts SGLang); Modal routes traffic once port 8000 accepts connections."""
    for directory in CACHE_ENV.values():
        Path(directory).mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(serve_command(), cwd=APP_DIR, env=serve_environment(environ=os.environ))
    threading.Thread(target=_exit_with, args=(process,), name="serve-watch", daemon=True).start()


@app.local_entrypoint()
def main(timeout: float = float(STARTUP_TIMEOUT), output: str = "smoke-result.json") -> None:
    """`modal run modal_app.py`: start a temporary endpoint, smoke-test it, save the report here."""
    sys.path.insert(0, str(ROOT))
    from serving.smoke import SmokeFailed, smoke_run

    url = serve.get_web_url()
    print(f"temporary endpoint: {url} (the first start downloads the model; the smoke test waits)")
    try:
        smoke_run(url=url, api_key=os.environ.get("OPENJEV_API_KEY") or None, timeout=timeout, output=Path(output))
    except SmokeFailed as exc:
        print(f"smoke test failed: {exc} (report: {output})", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"smoke test passed; report written to {output}")
