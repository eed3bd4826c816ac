"""Every file of the package that is not Python is shipped: matched by pyproject's package data (the wheel,
the sdist, install.sh and the .deb are built from it). A header left out broke every installed native front end."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).parents[2]


def test_every_non_python_file_of_the_package_is_package_data() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "hook/gpuhook"], capture_output=True, text=True,
                           check=True).stdout.split()
    assert files, "not a git checkout"
    unshipped = []
    for f in files:
        rel = f.removeprefix("hook/")
        if rel.endswith((".py", ".pyi")):
            continue
        shipped = any(fnmatch.fnmatch(rel, f"{pkg.replace('.', '/')}/{glob}")
                      for pkg, globs in data.items() for glob in globs)
        if not shipped:
            unshipped.append(rel)
    assert not unshipped, f"in the package but in no artifact: {unshipped}"
