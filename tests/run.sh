#!/usr/bin/env bash
# The whole test suite, as the README's quick start and CI run it (as root on Debian/Ubuntu):
# installs what the tests need, then lint, types, unit and end-to-end tests (real runc).
# Extra arguments go to pytest, e.g. `bash tests/run.sh -k amd`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  need=""
  for pkg in $(cat tests/debian-packages.txt); do
    dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
  done
  python3 -c 'import ensurepip' >/dev/null 2>&1 || need="$need python3-venv"
  if [ -n "$need" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
.venv/bin/ruff check hook tests
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
