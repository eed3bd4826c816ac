"""The counters the shim and hooks keep in state_dir: exact under concurrent writers, without a lock; never an
error of the container's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhook.apply import counters
from gpuhook.errors import PlanError, PolicyError, StateError

HOOK_DIR = str(Path(__file__).parents[3] / "hook")


def test_concurrent_processes_lose_no_count(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    code = (f"import sys; sys.path.insert(0, {HOOK_DIR!r})\nfrom gpuhook.apply import counters\n"
            f"for _ in range(200): counters.bump({state!r}, 'prepared', 'nvidia')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(8)]
    assert [p.wait(60) for p in procs] == [0] * 8
    assert counters.totals(state) == {("prepared", "nvidia"): 1600}


REASONS = [("a gpuhook error", PolicyError("no"), "PolicyError"), ("another", PlanError("no"), "PlanError"),
           ("a state error", StateError("no"), "StateError"), ("an os error", FileNotFoundError(2, "gone"), "OSError"),
           ("anything else", KeyError("x"), "InternalError")]


@pytest.mark.parametrize(("error", "reason"), [r[1:] for r in REASONS], ids=[r[0] for r in REASONS])
def test_reason_is_the_error_class(error: BaseException, reason: str) -> None:
    assert counters.reason(error) == reason


def test_labels_that_are_no_plain_names_are_counted_as_other(tmp_path: Path) -> None:
    for label in ("../../etc/passwd", "", "a" * 65, "x.y"):
        counters.bump(str(tmp_path), counters.REFUSED, label)
    counters.bump(str(tmp_path), counters.REFUSED, "Policy_Error-2")
    assert counters.totals(str(tmp_path)) == {("refused", "other"): 4, ("refused", "Policy_Error-2"): 1}
    assert sorted(os.listdir(tmp_path / "counters")) == ["refused.Policy_Error-2", "refused.other"]


def test_counting_never_fails_and_never_follows_a_link(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    counters.bump(str(blocked), counters.PREPARED, "amd")  # state_dir unusable: nothing, no error
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)
    counters.bump(str(loose), counters.PREPARED, "amd")  # untrusted: nothing written
    assert not (loose / "counters").exists()
    state = tmp_path / "state"
    counters.bump(str(state), counters.PREPARED, "amd")
    target = tmp_path / "target"
    target.write_text("")
    (state / "counters" / "prepared.nvidia").symlink_to(target)
    counters.bump(str(state), counters.PREPARED, "nvidia")
    assert target.read_text() == ""
    assert counters.totals(str(state)) == {("prepared", "amd"): 1}  # a link is no counter


def test_totals_skip_what_is_not_a_counter(tmp_path: Path) -> None:
    (tmp_path / "counters").mkdir()
    (tmp_path / "counters" / ".prepared.amd.123.tmp").write_text("xx")
    (tmp_path / "counters" / "nodot").write_text("x")
    (tmp_path / "counters" / "prepared.amd").write_text("\n\n")
    assert counters.totals(str(tmp_path)) == {("prepared", "amd"): 2}
    assert counters.totals(str(tmp_path / "none")) == {}
