#!/usr/bin/env bash
# The test suite, after scripts/bootstrap.sh. Two tiers:
#   scripts/test.sh         everything, as CI runs it (make test): lint, types, every test on SQLite (the
#                           embedded-model and browser tests included), then the database tests on PostgreSQL;
#   scripts/test.sh --fast  the edit-test loop (make test-fast): lint and every test on SQLite but the
#                           embedded-model, browser and multi-process ones (markers `embedded`, `browser`,
#                           `servers`); no Chromium or PostgreSQL needed.
# Any other argument goes to pytest, e.g. `scripts/test.sh --fast tests/ops -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
FAST=0
if [ "${1:-}" = "--fast" ]; then FAST=1; shift; fi

browser_ensure() {
  if ! command -v chromium >/dev/null 2>&1; then
    echo "== installing Debian's chromium for the browser tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || { echo "chromium could not be installed (run as root, or install Debian's chromium package)" >&2; exit 1; }
  fi
}

postgres_ensure() {
  if ! .venv/bin/python -c "import psycopg, sys; psycopg.connect(sys.argv[1], connect_timeout=3).close()" "$PG_URL" \
      2>/dev/null; then
    echo "== starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  fi
}

# Redis: the live dashboard's channel layer is tested through a real server (tests/admin/test_dashboard_live.py).
redis_ensure() {
  if ! .venv/bin/python -c "import redis; redis.Redis(host='127.0.0.1', port=6379, socket_connect_timeout=2).ping()" \
      2>/dev/null; then
    if ! command -v redis-server >/dev/null 2>&1; then
      echo "== installing Debian's redis-server for the channel layer tests"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
        || { echo "redis-server could not be installed (run as root, or install Debian's redis-server)" >&2; exit 1; }
    fi
    echo "== starting Redis"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis \
      --logfile /var/log/redis/ci.log
  fi
}

# Prometheus: tests/observability scrape `serve --workers 2` with Debian's real server and check the alert rules
# and the scrape config (deploy/observability) with its promtool. The tests start a server of their own; the
# package's service is kept from starting (policy-rc.d) and stopped if it runs anyway.
prometheus_ensure() {
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    echo "== installing Debian's prometheus for the observability tests"
    local policy=/usr/sbin/policy-rc.d made=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1; fi
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
      >/dev/null) || { echo "prometheus could not be installed (run as root, or install Debian's prometheus)" >&2; exit 1; }
    if [ "$made" = 1 ]; then rm -f "$policy"; fi
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/prometheus ]; then
      /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    fi
  fi
}

redis_ensure
echo "== ruff, import contracts"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports --no-cache
if [ "$FAST" = 1 ]; then
  echo "== pytest (SQLite; no embedded-model or browser tests)"
  # tests.tiers fails a test that loads the model or a browser without its marker.
  exec .venv/bin/python -m pytest -p no:cacheprovider -p tests.tiers -m "not embedded and not browser and not servers" "$@"
fi

PG_URL=${OPENJEV_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}
browser_ensure
prometheus_ensure
postgres_ensure
echo "== mypy"
.venv/bin/mypy inference api audit calibration batches openjev_site serving fake_sglang testbed tests bench
echo "== pytest (SQLite)"
.venv/bin/python -m pytest -p no:cacheprovider "$@"
echo "== pytest (PostgreSQL: database tests)"
OPENJEV_DATABASE_URL="$PG_URL" .venv/bin/python -m pytest -p no:cacheprovider -m postgres "$@"
