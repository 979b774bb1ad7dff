"""SGLang launch profiles (`OPENJEV_PROFILE`) and the exact `sglang.launch_server` command line.

A profile is a small data record: which weights to load, which public model id they answer for,
which GPU they were sized for and the SGLang flags that fit that pair. Keeping them as data (not as
shell scripts) lets `serve --sglang-python`, the Modal app, the compose example and the tests
agree on one command line.

Two flags are never a profile's choice:
- the radix (prefix) cache must stay on: every evaluation is one warm-up of the shared prefix and
  then N branches that continue it; without the cache each branch pays for the whole prefix again,
  so `--disable-radix-cache` is refused;
- hybrid models (Qwen3.5/3.6: Gated DeltaNet linear attention + full attention, "mamba" layers in
  SGLang's terms) need `--mamba-radix-cache-strategy extra_buffer`, the strategy that can keep the
  recurrent state at a branching position — exactly where our branches fork off the prefix.

Qwen3.6 is natively multimodal: SGLang loads its vision encoder unless launched `--language-only`.
The text-only profiles pass that flag (the encoder's weights and activations stay off the GPU, and
`image_data` cannot reach a model that would need them); the `-vision` profile omits it, for
deployments that accept images (`OPENJEV_MAX_IMAGES`, which refuses a text-only profile at startup).

Nothing here imports SGLang or Django: the web app never depends on SGLang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from inference.errors import StartupError

MAMBA_STRATEGY = "extra_buffer"


@dataclass(frozen=True)
class Profile:
    """One tested pairing of weights, GPU and SGLang flags."""

    name: str
    model: str
    """Public model id the API answers for (`OPENJEV_MODEL` default, `--served-model-name`)."""
    weights: str
    """`--model-path`: the (quantized) checkpoint SGLang loads; `OPENJEV_MODEL_PATH` overrides it."""
    gpu: str
    """What the flags were sized for; documentation, and the Modal GPU type for the default."""
    description: str
    max_context: int
    """The model's native context window: `OPENJEV_MAX_INPUT_TOKENS` above it is refused."""
    hybrid: bool
    """A hybrid (mamba / linear-attention) model: adds `--mamba-radix-cache-strategy extra_buffer`."""
    sglang_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    release_date: str | None = None
    vision: bool = False
    """SGLang serves the model's vision encoder: images are accepted (no `--language-only`)."""


LANGUAGE_ONLY = "--language-only"
_NVFP4_ARGS = ("--quantization", "modelopt_fp4", "--tp-size", "1", "--mem-fraction-static", "0.85")
PROFILES: Mapping[str, Profile] = MappingProxyType(
    {
        p.name: p
        for p in (
            Profile(
                name="qwen3.6-35b-a3b-nvfp4",
                model="Qwen/Qwen3.6-35B-A3B",
                weights="nvidia/Qwen3.6-35B-A3B-NVFP4",
                gpu="B200",
                description="Production default: Qwen3.6-35B-A3B (hybrid MoE, 3B active) in NVIDIA's NVFP4 "
                "quantization on one B200 (180 GB); FP4 GEMMs need Blackwell. Text only (--language-only).",
                max_context=262144,
                hybrid=True,
                sglang_args=(*_NVFP4_ARGS, LANGUAGE_ONLY),
            ),
            Profile(
                name="qwen3.6-35b-a3b-nvfp4-vision",
                model="Qwen/Qwen3.6-35B-A3B",
                weights="nvidia/Qwen3.6-35B-A3B-NVFP4",
                gpu="B200",
                description="The production default with its vision encoder: images in the state "
                "(OPENJEV_MAX_IMAGES > 0). The encoder and image tokens take GPU memory "
                "the text-only profile gives the KV cache.",
                max_context=262144,
                hybrid=True,
                sglang_args=_NVFP4_ARGS,
                vision=True,
            ),
            Profile(
                name="qwen3.6-35b-a3b-fp8",
                model="Qwen/Qwen3.6-35B-A3B",
                weights="Qwen/Qwen3.6-35B-A3B-FP8",
                gpu="H100",
                description="The production model in Qwen's official FP8 checkpoint (~36 GB of weights) on one "
                "80-141 GB Hopper or Blackwell GPU (H100, H200, B200). Text only (--language-only).",
                max_context=262144,
                hybrid=True,
                sglang_args=("--tp-size", "1", "--mem-fraction-static", "0.85", LANGUAGE_ONLY),
            ),
            Profile(
                name="qwen3-30b-a3b-gptq-int4",
                model="Qwen/Qwen3-30B-A3B",
                weights="Qwen/Qwen3-30B-A3B-GPTQ-Int4",
                gpu="L40S",
                description="A smaller single-GPU profile: Qwen3-30B-A3B (plain attention MoE, 3B active) in Qwen's "
                "official GPTQ-Int4 checkpoint (~17 GB) on one 24-80 GB GPU (RTX 4090, L4 24 GB with a short context, "
                "L40S, A100, H100). No mamba layers, so no mamba flag.",
                max_context=32768,
                hybrid=False,
                sglang_args=("--tp-size", "1", "--mem-fraction-static", "0.85"),
                release_date="2025-04-29",
            ),
        )
    }
)
DEFAULT_PROFILE = "qwen3.6-35b-a3b-nvfp4"

# Flags the launcher owns: they follow OPENJEV_* settings and serve's options, so an extra argument
# that repeats one would silently fork the API's view of the server from the server's own.
OWNED_FLAGS = frozenset(
    {
        "--model-path",
        "--model",
        "--served-model-name",
        "--context-length",
        "--host",
        "--port",
        "--revision",
        "--mamba-radix-cache-strategy",
    }
)
REFUSED_PREFIX = "--disable-radix"
"""`--disable-radix-cache`, and any abbreviation of it argparse would accept."""


def profile_get(*, name: str) -> Profile:
    """The profile called `name`, or a StartupError listing the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise StartupError(f"unknown SGLang profile {name!r}; known profiles: {', '.join(PROFILES)}") from None


def _flag_name(arg: str) -> str | None:
    return arg.split("=", 1)[0] if arg.startswith("--") else None


def extra_args_check(*, extra_args: Sequence[str]) -> None:
    """Refuse extra SGLang arguments that would break prefix reuse or fight the launcher."""
    for arg in extra_args:
        name = _flag_name(arg)
        if name is None:
            continue
        if name.startswith(REFUSED_PREFIX):
            raise StartupError(
                f"refusing {arg!r}: every evaluation relies on SGLang's radix (prefix) cache; "
                "without it each branch recomputes the whole shared prefix"
            )
        if name in OWNED_FLAGS:
            raise StartupError(
                f"refusing {arg!r} after --: it is set by serve itself "
                "(OPENJEV_MODEL_PATH, OPENJEV_SERVED_MODEL_NAME, OPENJEV_MAX_INPUT_TOKENS, "
                "OPENJEV_REVISION, --sglang-host/--sglang-port)"
            )


def _without_overridden(*, args: Sequence[str], overridden: set[str]) -> list[str]:
    """The profile's flags minus those the extra arguments set again (a flag and its value go together)."""
    kept: list[str] = []
    skipping = False
    for arg in args:
        name = _flag_name(arg)
        if name is not None:
            skipping = name in overridden
            if not skipping:
                kept.append(arg)
        elif not skipping:
            kept.append(arg)
    return kept


def sglang_command(
    *,
    profile: Profile,
    python: str,
    model: str,
    served_name: str,
    context_length: int,
    port: int,
    host: str,
    frontend: str,
    extra_args: Sequence[str] = (),
    revision: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and the extra environment that launch SGLang for `profile`.

    `model` is the checkpoint (`--model-path`), `served_name` the id SGLang reports, `context_length`
    the API's per-branch token limit (a branch never needs more). Extra arguments come last; one
    that repeats a profile flag replaces the profile's value instead of appearing twice.
    """
    extra_args_check(extra_args=extra_args)
    if context_length > profile.max_context:
        raise StartupError(
            f"a context of {context_length} tokens (OPENJEV_MAX_INPUT_TOKENS) is over the "
            f"{profile.max_context} tokens {profile.model} supports natively"
        )
    if frontend not in ("rust", "python"):
        raise StartupError(f"unknown SGLang frontend {frontend!r}: use rust or python")
    overridden = {name for arg in extra_args if (name := _flag_name(arg)) is not None}
    argv = [
        python,
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--served-model-name",
        served_name,
        "--context-length",
        str(context_length),
        "--host",
        host,
        "--port",
        str(port),
    ]
    if revision:
        argv += ["--revision", revision]
    if profile.hybrid:
        argv += ["--mamba-radix-cache-strategy", MAMBA_STRATEGY]
    argv += _without_overridden(args=profile.sglang_args, overridden=overridden)
    argv += list(extra_args)
    env = {**profile.env, "SGLANG_RUST_SERVER": "1" if frontend == "rust" else "0"}
    return argv, env
