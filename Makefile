# The two commands of the README, and the fast test tier for the edit-test loop. Each one sets everything up
# first (scripts/bootstrap.sh).
.PHONY: serve test test-fast lint bench

HOST ?= 127.0.0.1
PORT ?= 8000

serve:
	scripts/bootstrap.sh
	OPENJEV_SECRET_KEY="$${OPENJEV_SECRET_KEY:-$$(cat .cache/secret_key)}" \
		.venv/bin/python manage.py serve --host $(HOST) --port $(PORT)

test:
	scripts/bootstrap.sh
	scripts/test.sh

test-fast:
	scripts/bootstrap.sh
	scripts/test.sh --fast

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports --no-cache
	.venv/bin/mypy inference api audit calibration batches openjev_site serving fake_sglang testbed tests bench
