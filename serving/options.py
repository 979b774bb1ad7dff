"""`serve`'s options that are settings: where the backend comes from (`--connect`, `--sglang-python` and
the launched server's address) and the SGLang profile. Django-free, because `manage.py` applies them to
the environment before Django loads the settings: a command's own options win over the environment, and
an environment that only the options complete (`OPENJEV_BACKEND=sglang` with `--connect URL`) loads."""

from __future__ import annotations

import argparse


def source_arguments_add(*, parser: argparse.ArgumentParser) -> None:
    """The options, declared once for `serve`'s parser and for the early read in `manage.py`."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--connect", metavar="URL", help="use an existing SGLang server or gateway at URL")
    source.add_argument(
        "--sglang-python",
        metavar="PATH",
        help="launch SGLang with this Python interpreter (default: OPENJEV_SGLANG_PYTHON)",
    )
    parser.add_argument("--profile", help="SGLang launch profile (default: OPENJEV_PROFILE)")
    parser.add_argument("--sglang-host", default="127.0.0.1", help="address a launched SGLang listens on")
    parser.add_argument("--sglang-port", type=int, default=30000, help="port of a launched SGLang")


def source_environment(
    *, connect: str | None, sglang_python: str | None, profile: str | None, sglang_host: str, sglang_port: int
) -> dict[str, str]:
    """The `OPENJEV_*` variables the options stand for (none for an option not given)."""
    overrides = {"OPENJEV_PROFILE": profile} if profile else {}
    if sglang_python:
        return overrides | {
            "OPENJEV_BACKEND": "sglang",
            "OPENJEV_SGLANG_PYTHON": sglang_python,
            "OPENJEV_BACKEND_URL": f"http://{_url_host(sglang_host)}:{sglang_port}",
        }
    if connect:
        return overrides | {"OPENJEV_BACKEND": "sglang", "OPENJEV_BACKEND_URL": connect.rstrip("/")}
    return overrides


def command_environment(*, argv: list[str]) -> dict[str, str]:
    """The variables a `manage.py` command line sets (`serve`'s options; nothing for other commands, or for
    options the command's own parser will refuse with its usage message)."""
    if not argv or argv[0] != "serve":
        return {}
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    source_arguments_add(parser=parser)
    own = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    try:
        options, _ = parser.parse_known_args(own)
    except argparse.ArgumentError:
        return {}
    return source_environment(
        connect=options.connect,
        sglang_python=options.sglang_python,
        profile=options.profile,
        sglang_host=options.sglang_host,
        sglang_port=options.sglang_port,
    )


def _url_host(host: str) -> str:
    """An address as a URL host: IPv6 in brackets, the wildcard replaced by loopback."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
