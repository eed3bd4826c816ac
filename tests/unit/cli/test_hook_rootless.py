"""cli/hook.py under a rootless engine (its hooks run as the user): refused in one line before anything is read
or written (tests/e2e/test_rootless.py runs the real thing)."""

from __future__ import annotations

import json

import pytest

from gpuhook.cli import hook
from gpuhook.host import userns


@pytest.fixture
def rootless(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(userns, "own_host_uid", lambda: 47000)
    monkeypatch.setenv("GPUHOOK_CONFIG", str(tmp_path / "missing.toml"))  # never read: the refusal comes first


def _state(**annotations: str) -> bytes:
    return json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "created", "pid": 1, "bundle": "/nonexistent",
                       "annotations": annotations}).encode()


@pytest.mark.parametrize(("stage", "annotations", "said"), [
    ("prestart", {"gpuhook.dev/clocks": "1500"}, "gpuhook hook: gpuhook.dev/clocks asks gpuhook to change"),
    ("prestart", {"gpuhook.dev/gpus": "0"}, "gpuhook hook: this container's engine runs as uid 47000 on the host"),
    ("update-ldcache", {"gpuhook.dev/power-limit": "200"}, "gpuhook hook update-ldcache: gpuhook.dev/power-limit"),
], ids=["tuning", "gpus", "cdi-hook-tuning"])
def test_refused_in_one_line(rootless: None, capsys: pytest.CaptureFixture[str], stage: str,
                             annotations: dict[str, str], said: str) -> None:
    assert hook.main(stage, data=_state(**annotations)) == 1
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1 and "nothing was applied" in err


def test_poststop_has_nothing_to_restore(rootless: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert hook.main("poststop", data=_state(**{"gpuhook.dev/clocks": "1500"})) == 0
    assert capsys.readouterr().err == ""
