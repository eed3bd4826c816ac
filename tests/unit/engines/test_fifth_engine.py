"""A fifth engine is one record: registered in the table (as a plugin or a test would), it is one of configure's
choices, configure writes and reverts its file and names its daemon, doctor checks its registration and its cgroup
driver, and the CDI commands take it as a consumer, with nothing else edited (issue #44, 3)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.cli import admin as cli
from gpuhook.cli import doctor, doctor_engines, doctor_reload
from gpuhook.cli.cdi_files import describe, installed_readers
from gpuhook.cli.doctor import run_checks
from gpuhook.config import Config
from gpuhook.engines import table
from gpuhook.engines.engine import Cdi, CgroupDriver, Daemon, Engine
from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError
from gpuhook.frozen import replace

FakeHost = Callable[..., str]


def _render(old: str, wanted: Wanted, path: str) -> str:
    """The toy engine's editor: a drop-in naming the shim."""
    return f'[runtimes.gpuhook]\npath = "{wanted.shim}"\n'


NERDCTL = Engine(name="nerdctl", label="Nerdctl", program="nerdctld", config_path="/etc/nerdctl/gpuhook.toml",
                 render=_render, daemon=Daemon(called="nerdctld", unit="nerdctl"), hooks_d=True,
                 cgroup=CgroupDriver(path="/etc/nerdctl/nerdctl.toml", systemd_mark='cgroup_manager="systemd"',
                                     cgroupfs_mark="", default="cgroupfs"),
                 cdi=Cdi(releases=(("2.0.0", "0.8.0"), ("2.1.0", "1.0.1"))))


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """NERDCTL registered for this test, its files in tmp_path; the built-in engines out of doctor's way."""
    monkeypatch.setattr(table, "_registered", [])
    engine = replace(NERDCTL, config_path=str(tmp_path / "gpuhook.toml"),
                     cgroup=replace(NERDCTL.cgroup, path=str(tmp_path / "nerdctl.toml")))
    table.register(engine)
    return engine


def test_configure_takes_it_writes_its_file_and_reverts_it(toy: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    assert "nerdctl" in table.names()
    assert cli.main(["configure", "nerdctl", "--dry-run"]) == 0
    assert not os.path.exists(toy.config_path) and "dry run: nothing was written" in capsys.readouterr().out
    assert cli.main(["configure", "nerdctl", "--runtime-path", "/opt/gpuhook/bin/gpuhook-runtime"]) == 0
    assert Path(toy.config_path).read_text() == '[runtimes.gpuhook]\npath = "/opt/gpuhook/bin/gpuhook-runtime"\n'
    said = capsys.readouterr().out
    assert "restart nerdctld (" in said and "for Nerdctl to see the gpuhook runtime" in said
    assert cli.main(["configure", "nerdctl", "--revert"]) == 0
    assert not os.path.exists(toy.config_path) and "for Nerdctl to drop the gpuhook runtime" in capsys.readouterr().out


def test_an_engine_no_record_names_is_refused(toy: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["configure", "lxd"])
    assert "invalid choice: 'lxd'" in capsys.readouterr().err
    with pytest.raises(EngineConfigError, match="an engine called 'nerdctl' is known already"):
        table.register(toy)
    with pytest.raises(EngineConfigError, match=r"unknown engine 'lxd': gpuhook knows docker, .*, nerdctl"):
        table.named("lxd")


def test_doctor_checks_its_registration(toy: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        fake_host: FakeHost) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nerdctld").write_text("#!/bin/sh\n")
    (bindir / "nerdctld").chmod(0o755)
    monkeypatch.setattr(table, "BUILTIN", ())
    (found,) = doctor_engines.checks(search=str(bindir), cdi_specs=False)
    assert found[0] == "warn" and found[1].endswith(f"{toy.config_path} is absent: gpuhook is not registered")
    assert found[2].startswith("gpuhook configure nerdctl")
    Path(toy.config_path).write_text(_render("", Wanted(shim="/s", gpuhook="/h", config="/c"), toy.config_path))
    monkeypatch.setattr(doctor, "_runtime", lambda runtime: [])
    monkeypatch.setattr(doctor, "_paths", lambda: [])
    monkeypatch.setattr(doctor_reload, "SYSTEMD_RUNNING", "/nonexistent")
    findings = run_checks(Config(path="c", host_root=fake_host(nvidia=1), state_dir=str(tmp_path / "s")))
    assert [f.level for f in findings if "nerdctl" in f.what] == ["ok"]  # the whole doctor reports it


def test_doctor_reads_its_cgroup_driver_and_its_hooks(toy: Engine) -> None:
    assert ("nerdctl", "nerdctld", toy.cgroup) in doctor_reload.cgroup_drivers()
    assert doctor_reload.systemd_driver("nerdctl", '[x]\ncgroup_manager = "systemd"\n', False)
    assert not doctor_reload.systemd_driver("nerdctl", "", True)  # its default: cgroupfs
    hook = doctor_reload.assess((1, 1, 12), (252,), ["nerdctl"], [], ["/etc/containers/oci/hooks.d/gpuhook.json"], [])
    assert [f.level for f in hook] == ["ok", "warn"] and "(nerdctl)" in hook[1].what  # it runs hooks.d entries


def test_the_cdi_commands_take_it_as_a_consumer(toy: Engine) -> None:
    (nerd,) = installed_readers(["nerdctl=2.0.4"])
    assert (nerd.label, nerd.library, nerd.highest) == ("Nerdctl 2.0.4", "0.8.0", "0.8.0")
    assert installed_readers(["nerdctl=1.7.0"])[0].library == ""
    assert "Nerdctl >= 2" in describe(())
