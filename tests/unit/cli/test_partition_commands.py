"""`gpuhook partition apply FILE`: a layout file is read bounded (issue 43, 7): a FIFO is refused at once, not
waited on, and JSON or TOML nested 2,000 deep is one line, never a RecursionError's traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ...conftest import FakeHost
from .test_config_commands import _one_line_refusal


@pytest.fixture
def config(fake_host: FakeHost, tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'host_root = "{fake_host(nvidia=1)}"\nstate_dir = "{tmp_path / "state"}"\n')
    return path


@pytest.mark.parametrize("dry", [[], ["--dry-run"]], ids=["apply", "dry-run"])
def test_a_fifo_is_refused_at_once(config: Path, tmp_path: Path, dry: list[str]) -> None:
    fifo = tmp_path / "layout.toml"
    os.mkfifo(fifo)
    _one_line_refusal(["partition", "apply", *dry, str(fifo)], config, "not a regular file")


@pytest.mark.parametrize(("name", "text", "says"), [
    ("layout.json", '{"nvidia": [' + "[" * 2000 + "]" * 2000 + "]}", "nests deeper than 64 levels"),
    ("layout.toml", "[[nvidia]]\ngpus = " + "[" * 2000 + "]" * 2000 + "\n", "nests deeper than 64 levels"),
    ("layout.toml", "[[nvidia]]\ngpus = " + "[" * 100 + "]" * 100 + "\n", "nests deeper than 64 levels"),
    ("layout.toml", "x" * (1 << 21), "larger than"),
], ids=["json-2000", "toml-2000", "toml-100", "too-large"])
def test_deep_or_large_layouts_are_one_line(config: Path, tmp_path: Path, name: str, text: str, says: str) -> None:
    (tmp_path / name).write_text(text)
    _one_line_refusal(["partition", "apply", "--dry-run", str(tmp_path / name)], config, says)
