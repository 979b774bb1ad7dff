"""The deploy directory stays valid: the compose file parses and agrees with the profiles and the
serving rules, and the Dockerfile builds the API from files that exist."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from serving.config_reading import config_from_env
from serving.profiles import DEFAULT_PROFILE, PROFILES, sglang_command
from tests.ops.packages import embedded_only_packages, sync_packages

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _workers(compose: dict[str, Any]) -> dict[str, Any]:
    return {name: s for name, s in compose["services"].items() if "sglang.launch_server" in s.get("command", [])}


def _flag(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_workers_launch_exactly_the_default_profiles_command(compose):
    workers = _workers(compose)
    assert len(workers) >= 2
    profile = PROFILES[DEFAULT_PROFILE]
    argv, env = sglang_command(
        profile=profile,
        python="python3",
        model=profile.weights,
        served_name=profile.model,
        context_length=32768,
        port=30000,
        host="0.0.0.0",
        frontend="rust",
    )
    devices = set()
    for service in workers.values():
        assert service["command"] == argv
        assert {k: v for k, v in service["environment"].items() if k in env} == env
        assert service["ipc"] == "host" and service["healthcheck"]["test"][-1].endswith(":30000/health")
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        devices.add(tuple(device["device_ids"]))
    assert len(devices) == len(workers)  # one GPU each


def test_nothing_disables_the_radix_cache_or_drops_the_log_probs():
    text = (DEPLOY / "compose.yaml").read_text()
    for forbidden in ("--disable-radix-cache", "grpc://", "--pd-disaggregation", "--disaggregation-mode"):
        assert forbidden not in text


def test_the_gateway_routes_cache_aware_over_http_to_every_worker(compose):
    gateway = compose["services"]["gateway"]
    command = gateway["command"]
    assert command[0] == "launch" and _flag(command, "--policy") == "cache_aware"
    assert "--cache-threshold" not in command  # the default keeps a batch on its warm-up's worker (tests/gateway)
    urls = command[command.index("--worker-urls") + 1 :]
    assert urls == [f"http://{name}:30000" for name in _workers(compose)]
    assert set(gateway["depends_on"]) == set(_workers(compose))
    assert gateway["healthcheck"]["test"][-1].endswith(":30000/readiness')")


def test_the_gateway_image_pins_the_smg_version_the_tests_run():
    gateway = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["gateway"]
    dockerfile = gateway["build"]["dockerfile_inline"]
    (pinned,) = re.findall(r"pip install --no-cache-dir smg==(\S+)", dockerfile)
    locked = {p["name"]: p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    assert pinned == locked["smg"]
    assert json.loads(dockerfile.split("ENTRYPOINT", 1)[1].strip()) == ["smg"]


def test_api_replicas_use_the_gateway_and_postgresql(compose):
    services = compose["services"]
    api = services["api"]
    assert api["deploy"]["replicas"] >= 2
    assert api["command"][:2] == ["--connect", "http://gateway:30000"]
    env = api["environment"]
    assert env["OPENJEV_BACKEND_URL"] == "http://gateway:30000" and env["OPENJEV_BRANCH_MODE"] == "batched"
    assert env["OPENJEV_DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env["OPENJEV_DATABASE_URL"]
    assert env["OPENJEV_PROFILE"] in PROFILES
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["build"]["dockerfile"] == "deploy/Dockerfile"
    assert services["migrate"]["entrypoint"][-2:] == ["migrate", "--no-input"]
    assert services["postgres"]["image"].startswith("postgres:")
    drain = float(_flag(api["command"], "--drain"))
    assert int(api["stop_grace_period"].rstrip("s")) > drain


def test_replicas_share_a_redis_channel_layer_and_the_balancer_passes_websockets(compose):
    services = compose["services"]
    assert services["api"]["environment"]["OPENJEV_CHANNEL_LAYER_URL"] == "redis://redis:6379/0"
    assert services["redis"]["image"].startswith("redis:")
    assert services["api"]["depends_on"]["redis"]["condition"] == "service_healthy"
    nginx = compose["configs"]["nginx"]["content"]
    websockets = nginx.split("location ~ ")[1].split("}")[0]
    assert "v1/systemone/stream" in websockets and "dashboard/live" in websockets
    assert "proxy_set_header Upgrade websocket;" in websockets and "Connection upgrade;" in websockets
    assert "proxy_set_header Host $$http_host;" in websockets


def test_the_load_balancer_spreads_over_the_api_replicas(compose):
    nginx = compose["configs"]["nginx"]["content"]
    assert re.search(r"server api:8000\b", nginx) and "proxy_pass http://openjev;" in nginx
    assert "$" not in nginx.replace("$$", "")  # compose interpolates a lone $ ($$ is its escape)
    assert nginx.count("proxy_set_header Host $$http_host;") == 2  # the admin's Origin checks see the browser's Host
    assert compose["services"]["lb"]["ports"] == ["8000:8000"]


def test_the_balancer_forwards_each_clients_address_and_only_the_projects_network_is_trusted(compose):
    nginx = compose["configs"]["nginx"]["content"]
    for location in nginx.split("location ")[1:]:
        assert "proxy_set_header X-Forwarded-For $$proxy_add_x_forwarded_for;" in location
        assert "proxy_set_header X-Forwarded-Proto $$scheme;" in location
    (subnet,) = [c["subnet"] for c in compose["networks"]["default"]["ipam"]["config"]]
    trusted = compose["services"]["api"]["environment"]["OPENJEV_TRUSTED_PROXIES"]
    assert trusted == subnet
    default = re.fullmatch(r"\$\{OPENJEV_COMPOSE_SUBNET:-(.+)\}", subnet)
    assert default is not None
    assert config_from_env({"OPENJEV_TRUSTED_PROXIES": default.group(1)}).trusted_proxies[0].is_private


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def test_the_dockerfile_builds_the_api_without_sglang_or_the_embedded_engine():
    instructions = _dockerfile()
    assert instructions[0] == ("FROM", "python:3.12-slim-bookworm")
    for instruction, args in instructions:
        if instruction == "COPY" and "--from" not in args:
            *sources, _ = shlex.split(args)
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    (sync,) = [args for instruction, args in instructions if instruction == "RUN" and "uv sync" in args]
    assert "--frozen" in sync and "--no-dev" in sync
    assert not sync_packages(args=shlex.split(sync)) & embedded_only_packages(), "the image installs a model package"
    assert not [args for instruction, args in instructions if instruction == "RUN" and "sglang" in args]
    entrypoint = json.loads(dict(instructions)["ENTRYPOINT"])
    assert entrypoint[:3] == ["python", "manage.py", "serve"] and _flag(entrypoint, "--host") == "0.0.0.0"
    assert dict(instructions)["USER"] != "root" and "EXPOSE" in dict(instructions)
    assert "/health/live" in dict(instructions)["HEALTHCHECK"]


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> what a service mounts there: a path under deploy/ (bind mounts) or a named volume."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        mounts[target] = source
    return mounts


def test_prometheus_scrapes_each_api_replica_directly_with_the_rules_and_token_it_mounts(compose):
    services = compose["services"]
    prometheus = services["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:v2.")  # the rules' format, checked by promtool 2.42
    command = prometheus["command"]
    config_path = next(a.split("=", 1)[1] for a in command if a.startswith("--config.file="))
    assert next(a for a in command if a.startswith("--storage.tsdb.path=")).endswith("=/prometheus")
    mounts = _mounts(prometheus)
    assert mounts["/prometheus"] in compose["volumes"]  # the data outlives the container
    for target, source in mounts.items():
        if source.startswith("."):
            assert (DEPLOY / source).is_file(), f"{target}: {source} is not a file under deploy/"
            assert source.startswith("./observability/")
    config = yaml.safe_load((DEPLOY / mounts[config_path]).read_text())
    here = str(Path(config_path).parent)
    for rules in config["rule_files"]:  # relative paths are read beside the config file
        assert f"{here}/{rules}" in mounts, f"rule file {rules} is not mounted"
        assert (DEPLOY / mounts[f"{here}/{rules}"]).is_file()
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "openjev-api" and job["metrics_path"] == "/metrics"
    # One target per replica (Docker's DNS answers the service's name with every replica), on the API's port.
    (discovery,) = job["dns_sd_configs"]
    port = int(_flag(json.loads(dict(_dockerfile())["ENTRYPOINT"]), "--port"))
    assert discovery["names"] == ["api"] and discovery["type"] == "A" and discovery["port"] == port
    assert services["api"]["deploy"]["replicas"] >= 2 and "static_configs" not in job
    assert "lb" not in json.dumps(job)  # never through the balancer
    # The token the API checks is the one Prometheus sends: both from OPENJEV_METRICS_TOKEN.
    token_file = f"{here}/{job['authorization']['credentials_file']}"
    (token,) = [c for c in prometheus["configs"] if c["target"] == token_file]
    assert compose["configs"][token["source"]]["content"].strip() == "${OPENJEV_METRICS_TOKEN:-}"
    assert services["api"]["environment"]["OPENJEV_METRICS_TOKEN"] == "${OPENJEV_METRICS_TOKEN:-}"
    # Prometheus' UI and API have no authentication: loopback only.
    assert all(str(p).startswith("127.0.0.1:") for p in prometheus["ports"])
    assert prometheus["depends_on"] == ["api"]
