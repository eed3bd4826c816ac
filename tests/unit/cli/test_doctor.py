from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.cli import doctor, doctor_engines, doctor_reload
from gpuhook.cli.doctor import run_checks
from gpuhook.config import Config
from gpuhook.engines import table as engines
from gpuhook.frozen import replace

FakeHost = Callable[..., str]


def _levels(findings: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {f.what: f.level for f in findings}


@pytest.fixture(autouse=True)
def _no_real_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's runc is its own finding (test_runtime_finding); the other tests are about the host tree."""
    monkeypatch.setattr(doctor, "_runtime", lambda runtime: [])
    monkeypatch.setattr(doctor, "_paths", lambda: [])  # test_doctor_paths.py: the front ends beside the command
    monkeypatch.setattr(doctor_reload, "SYSTEMD_RUNNING", "/nonexistent")  # test_doctor_reload.py fakes systemd


def test_healthy_host(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "BUILTIN", ())
    findings = run_checks(Config(path="c", host_root=fake_host(nvidia=1, amd=1), state_dir=str(tmp_path / "s")))
    assert all(f.level == "ok" for f in findings), findings
    assert any("amd device nodes present (groups 44, 109)" in f.what for f in findings)


def test_missing_node_fails_with_the_fix(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "BUILTIN", ())
    host = fake_host(nvidia=2)
    os.unlink(host + "/dev/nvidia1")
    (bad,) = [f for f in run_checks(Config(path="c", host_root=host, state_dir=str(tmp_path))) if f.level != "ok"]
    assert bad.level == "fail" and "/dev/nvidia1" in bad.what and "nvidia-modprobe" in bad.fix


def test_engine_registration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_host: FakeHost) -> None:
    daemon, crio = tmp_path / "daemon.json", tmp_path / "crio.toml"
    daemon.write_text('{"runtimes": {"gpuhook": {"path": "/usr/local/bin/gpuhook-runtime"}}}')
    crio.write_text("[crio.runtime]\n")
    monkeypatch.setattr(engines, "BUILTIN", (replace(engines.DOCKER, config_path=str(daemon)),
                                             replace(engines.CRIO, config_path=str(crio)),
                                             replace(engines.PODMAN, config_path=str(tmp_path / "absent.json"),
                                                     program="no-such-podman")))
    monkeypatch.setattr(doctor_engines, "_gpuhook_specs", lambda: False)
    findings = run_checks(Config(path="c", host_root=fake_host(amd=1), state_dir=str(tmp_path / "s")))
    (docker,) = [f for f in findings if f.what.startswith("docker") and "--gpus" not in f.what]
    assert docker.level == "ok" and docker.what.endswith(f"GPU containers take the shim (docker run --runtime "
                                                         f"gpuhook); gpuhook registered in place in {daemon}")
    (crio_found,) = [f for f in findings if f.what.startswith("crio")]
    assert crio_found.level == "warn" and crio_found.what.endswith(
        f"its containers cannot get GPUs: gpuhook is not registered in {crio}")
    assert crio_found.fix == "gpuhook configure crio, then restart CRI-O"
    assert not any("podman" in f.what for f in findings)  # not installed: not reported


def test_a_crio_drop_in_crio_ignores_is_a_failure(tmp_path: Path) -> None:
    """An earlier gpuhook listed its keys in allowed_annotations, which makes CRI-O ignore the handler (found on a
    real CRI-O: tests/cluster/test_crio.py); configure writes a drop-in doctor finds registered."""
    from gpuhook.engines.files import configure
    from gpuhook.engines.wanted import Wanted

    crio = tmp_path / "99-gpuhook.toml"
    crio.write_text('[crio.runtime.runtimes.gpuhook]\nruntime_path = "/usr/local/bin/gpuhook-runtime"\n'
                    'runtime_type = "oci"\nallowed_annotations = ["gpuhook.dev/gpus"]\n')
    (level, what, fix), = doctor_engines.checks({"crio": str(crio)}, search=str(tmp_path), cdi_specs=False)
    assert level == "fail" and "ignores the whole gpuhook handler" in what and fix.startswith("gpuhook configure crio")
    configure("crio", str(crio), Wanted(shim="/usr/local/bin/gpuhook-runtime", gpuhook="/usr/local/bin/gpuhook-hook",
                                        config="/etc/gpuhook/config.toml"))
    assert doctor_engines.checks({"crio": str(crio)}, search=str(tmp_path), cdi_specs=False) == [
        ("ok", "crio (not installed here): reads CDI specs from CRI-O 1.24 (its release is not known); GPU containers "
         f"take the shim (a RuntimeClass with handler gpuhook); gpuhook registered in place in {crio}")]


def test_an_installed_engine_without_its_config_is_unregistered(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "dockerd").write_text("#!/bin/sh\n")
    (bindir / "dockerd").chmod(0o755)
    paths = {"docker": str(tmp_path / "daemon.json"), "podman": str(tmp_path / "hooks.json")}
    found = doctor_engines.checks(paths, proc=str(tmp_path / "no-proc"), search=str(bindir), cdi_specs=False)
    assert found[0] == ("warn", "docker (release unknown): reads CDI specs from Docker 25 (its release is not known); "
                        f"its containers cannot get GPUs: {tmp_path}/daemon.json is absent: gpuhook is not registered",
                        "gpuhook configure docker, then restart dockerd")
    assert len(found) == 2 and "no nvidia-container-runtime-hook on dockerd's PATH" in found[1][1]  # podman absent


@pytest.mark.parametrize(("content", "whose"), [
    ("#!/usr/bin/python3 -IS\nimport sys\nfrom gpuhook.cli.nvidia_hook import main\n", "gpuhook's"),
    ("#!/bin/sh\n# NVIDIA Container Runtime Hook\n", "NVIDIA's container toolkit's"),
], ids=["gpuhook", "nvidia"])
def test_whose_gpus_hook_dockerd_runs(tmp_path: Path, content: str, whose: str) -> None:
    hook = tmp_path / "nvidia-container-runtime-hook"
    hook.write_text(content)
    hook.chmod(0o755)
    level, what = doctor_engines.gpus_hook(engines.DOCKER, str(tmp_path))
    assert level == "ok" and what == f"docker --gpus: dockerd runs {hook}, {whose}" + (
        "" if whose == "gpuhook's" else " (gpuhook's hook is not used)")


@pytest.mark.parametrize(("version", "helpers", "level", "says"), [
    ("29.3.0", ("nvidia-cdi-hook",), "ok", "dockerd 29.3.0 finds nvidia-cdi-hook: --gpus takes CDI devices"),
    ("29.3.0", ("nvidia-cdi-hook", "nvidia-container-runtime-hook"), "ok", ", then {d}/nvidia-container-runtime-hook "
     "where that fails"),
    ("29.3.0", (), "warn", "dockerd 29.3.0 takes --gpus as amd.com/gpu CDI devices where the specs hold only AMD"),
    ("29.2.1", ("nvidia-cdi-hook",), "warn", "`docker run --gpus` fails with 'could not select device driver'"),
    ("28.5.2", ("nvidia-cdi-hook", "nvidia-container-runtime-hook"), "ok", "dockerd runs {d}/nvidia-container-runtime"),
], ids=["29-cdi", "29-cdi-then-hook", "29-amd", "29.2-no-cdi", "28-hook"])
def test_where_docker_gpus_goes_by_release(tmp_path: Path, version: str, helpers: tuple[str, ...], level: str,
                                           says: str) -> None:
    """Docker 29.3 on: --gpus through CDI where nvidia-cdi-hook is on dockerd's PATH, AMD's CDI devices without any
    NVIDIA helper; before it, only the runtime hook."""
    for name in helpers:
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    found = doctor_engines.gpus_hook(engines.DOCKER, str(tmp_path), version)
    assert found[0] == level and says.format(d=tmp_path) in found[1], found


@pytest.mark.parametrize(("text", "affected"), [
    ("runc version 1.1.5+ds1", True), ("runc version 1.1.13", True), ("runc version 1.1.14", False),
    ("runc version 1.2.0-rc.2", True), ("runc version 1.2.0", False), ("runc version 1.3.1", False),
    ("crun version 1.8", False)], ids=lambda v: str(v))
def test_runc_cve_2024_45310(text: str, affected: bool) -> None:
    from gpuhook.cli.doctor import runc_affected_by_cve_2024_45310

    assert runc_affected_by_cve_2024_45310(text) is affected


@pytest.mark.parametrize(("version", "level"), [("runc version 1.1.5+ds1", "warn"), ("runc version 1.1.15", "ok")])
def test_runtime_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, level: str) -> None:
    monkeypatch.undo()
    runtime = tmp_path / "runc"
    runtime.write_text(f"#!/bin/sh\necho '{version}'\n")
    runtime.chmod(0o755)
    (finding,) = doctor._runtime(str(runtime))
    assert finding.level == level and version in finding.what
    if level == "warn":
        assert "CVE-2024-45310" in finding.what and "1.1.14" in finding.fix


DAEMON_JSON = '{"runtimes": {"gpuhook": {"path": "/usr/bin/gpuhook-runtime"}}%s}'


@pytest.mark.parametrize(("docker", "runc", "features", "level"), [
    ("29.8.1", "runc version 1.1.5+ds1", "", "fail"),
    ("29.5.0", "runc version 1.1.15", "", "fail"),
    ("29.8.1", "runc version 1.1.5+ds1", ', "features": {"time-namespaces": false}', "ok"),
    ("29.8.1", "runc version 1.2.0", "", None),
    ("29.4.2", "runc version 1.1.5", "", None),
    ("28.5.2", "runc version 1.1.5", "", None),
    ("29.8.1", "crun version 1.8", "", None),
], ids=lambda v: str(v))
def test_docker_time_namespaces_on_an_older_runc(tmp_path: Path, docker: str, runc: str, features: str,
                                                 level: str | None) -> None:
    """Docker 29.5 gives every container a time namespace; runc before 1.2 refuses it: every container through
    gpuhook's runtime fails, unless daemon.json turns the feature off."""
    (tmp_path / "dockerd").write_text("#!/bin/sh\n")
    (tmp_path / "dockerd").chmod(0o755)
    config = tmp_path / "daemon.json"
    config.write_text(DAEMON_JSON % features)
    found = doctor_engines.time_namespaces(runc, search=str(tmp_path), version=lambda _: docker, config=str(config))
    assert [f[0] for f in found] == ([level] if level else [])
    if level == "fail":
        assert "does not exist" in found[0][1] and '"time-namespaces": false' in found[0][2]
        assert "runc to 1.2" in found[0][2]


def test_docker_without_gpuhook_registered_is_not_about_gpuhooks_runtime(tmp_path: Path) -> None:
    (tmp_path / "dockerd").write_text("#!/bin/sh\n")
    (tmp_path / "dockerd").chmod(0o755)
    config = tmp_path / "daemon.json"
    config.write_text("{}")
    assert doctor_engines.time_namespaces("runc version 1.1.5", search=str(tmp_path), version=lambda _: "29.8.1",
                                          config=str(config)) == []
