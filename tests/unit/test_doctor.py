from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook import engines
from gpuhook.config import Config
from gpuhook.doctor import run_checks

FakeHost = Callable[..., str]


def _levels(findings: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {f.what: f.level for f in findings}


def test_healthy_host(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "DEFAULT_PATHS", {})
    findings = run_checks(Config(path="c", host_root=fake_host(nvidia=1, amd=1), state_dir=str(tmp_path / "s")))
    assert all(f.level == "ok" for f in findings), findings
    assert any("amd device nodes present (groups 44, 109)" in f.what for f in findings)


def test_missing_node_fails_with_the_fix(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "DEFAULT_PATHS", {})
    host = fake_host(nvidia=2)
    os.unlink(host + "/dev/nvidia1")
    (bad,) = [f for f in run_checks(Config(path="c", host_root=host, state_dir=str(tmp_path))) if f.level != "ok"]
    assert bad.level == "fail" and "/dev/nvidia1" in bad.what and "nvidia-modprobe" in bad.fix


def test_engine_registration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_host: FakeHost) -> None:
    daemon, crio = tmp_path / "daemon.json", tmp_path / "crio.toml"
    daemon.write_text('{"runtimes": {"gpuhook": {"path": "/usr/local/bin/gpuhook-runtime"}}}')
    crio.write_text("[crio.runtime]\n")
    monkeypatch.setattr(engines, "DEFAULT_PATHS", {"docker": str(daemon), "crio": str(crio),
                                                   "podman": str(tmp_path / "absent.json")})
    levels = _levels(run_checks(Config(path="c", host_root=fake_host(amd=1), state_dir=str(tmp_path / "s"))))
    assert levels[f"docker: gpuhook registered in {daemon}"] == "ok"
    assert levels[f"crio: gpuhook not registered in {crio}"] == "warn"
    assert not any("podman" in what for what in levels)  # not installed: not reported
