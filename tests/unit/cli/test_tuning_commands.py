"""`gpuhook status --ledger FILE`: a ledger of the right outline but other shapes inside, or nested 2,000 deep, or
a FIFO, is one line naming the file and the way out (issue 43, 7), never a traceback or a wait."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .test_config_commands import _one_line_refusal

SETTING = {"gpu": "GPU-1", "index": 0, "name": "clocks", "original": "a", "value": "b", "seq": 1,
           "holders": [{"id": "c1", "pid": 1, "start": "1"}]}


@pytest.mark.parametrize(("ledger", "says"), [
    ({"settings": {"k": "not an entry"}, "leases": {}}, "holds an entry gpuhook did not write"),
    ({"settings": {"k": {**SETTING, "holders": [7]}}, "leases": {}}, "holds an entry gpuhook did not write"),
    ({"settings": {"k": {**SETTING, "seq": "first"}}, "leases": {}}, "holds an entry gpuhook did not write"),
    ({"settings": {}, "leases": {"GPU-1": ["c1"]}}, "holds an entry gpuhook did not write"),
    ({"settings": {}, "leases": {}, "deep": json.loads("[" * 900 + "]" * 900)}, "nests deeper than 64 levels"),
], ids=["entry-a-string", "holder-a-number", "seq-a-word", "lease-a-list", "deep"])
def test_a_ledger_of_other_shapes_is_one_line(tmp_path: Path, ledger: dict[str, object], says: str) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"version": 1, **ledger}))
    _one_line_refusal(["status", "--ledger", str(path)], tmp_path / "none.toml", says)


def test_a_ledger_nested_2000_deep_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_text('{"version": 1, "settings": {}, "leases": {}, "x": ' + "[" * 2000 + "]" * 2000 + "}")
    _one_line_refusal(["status", "--ledger", str(path)], tmp_path / "none.toml", "nests deeper than 64 levels")


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "ledger.json")
    _one_line_refusal(["status", "--ledger", str(tmp_path / "ledger.json")], tmp_path / "none.toml",
                      "not a regular file")
