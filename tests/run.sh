#!/usr/bin/env bash
# The whole test suite, as the README's quick start and CI run it (as root on Debian/Ubuntu): installs what the
# tests need, then lint, types, and the unit, end-to-end (real runtimes and engines) and installed-product tiers.
# Extra arguments go to pytest, e.g. `bash tests/run.sh -k amd`. Each step says what it is doing and when.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { echo "tests/run.sh [$(( $(date +%s) - started ))s]: $*"; }

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  need=""
  for pkg in $(cat tests/debian-packages.txt); do
    dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
  done
  python3 -c 'import ensurepip' >/dev/null 2>&1 || need="$need python3-venv"
  if [ -n "$need" ]; then
    step "installing Debian packages:$need (apt-get; a minute or two on a new machine)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
  fi
fi

[ -x .venv/bin/python ] || { step "creating .venv"; python3 -m venv .venv; }
step "installing gpuhook and the test tools into .venv (pip)"
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
step "ruff"
.venv/bin/ruff check hook tests
step "mypy"
.venv/bin/mypy
step "pytest: tests/unit, tests/e2e, tests/installed (each tier announced as it starts)"
exec .venv/bin/python -m pytest "$@"  # its summary is the run's last line
