"""doctor's daemon-reload checks: the pure parts with literals, then the whole check with runc's and systemd's
`--version` faked on PATH, the engines' config files and systemd's marker in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.apply.dev_char_links import create, wanted
from gpuhook.cli import doctor_reload as reload
from gpuhook.cli.doctor import run_checks
from gpuhook.config import Config
from gpuhook.engines import table as engines
from gpuhook.frozen import replace
from gpuhook.host.root import Root
from gpuhook.vendors.discover import discover

from ...conftest import FakeHost


@pytest.mark.parametrize(("engine", "text", "v2", "systemd"), [
    ("docker", '{"exec-opts": ["native.cgroupdriver=systemd"]}', False, True),
    ("docker", '{"exec-opts": [ "native.cgroupdriver = cgroupfs" ]}', True, False),
    ("docker", "{}", True, True),  # Docker's default on a cgroup v2 host
    ("docker", "", False, False),
    ("containerd", "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n"
                   "  SystemdCgroup = true\n", False, True),
    ("containerd", "version = 2\n", True, False),
    ("crio", '[crio.runtime]\ncgroup_manager = "cgroupfs"\n', True, False),
    ("crio", "", False, True),
    ("podman", '[engine]\ncgroup_manager = "systemd"\n', False, True),
    ("podman", '[engine]\ncgroup_manager="cgroupfs"\n', False, False),
    ("kubelet", "kind: KubeletConfiguration\ncgroupDriver: systemd\n", False, True),
    ("kubelet", "kind: KubeletConfiguration\n", True, False),
], ids=["docker-says", "docker-cgroupfs", "docker-v2-default", "docker-v1-default", "containerd-says",
        "containerd-default", "crio-cgroupfs", "crio-default", "podman-says", "podman-cgroupfs", "kubelet-says",
        "kubelet-default"])
def test_systemd_driver(engine: str, text: str, v2: bool, systemd: bool) -> None:
    assert reload.systemd_driver(engine, text, v2) is systemd


@pytest.mark.parametrize(("text", "name", "version"), [
    ("runc version 1.1.5+ds1", "runc", (1, 1, 5)), ("runc version 1.1.7", "runc", (1, 1, 7)),
    ("runc version 1.2.0-rc.1", "runc", (1, 2, 0)), ("crun version 1.8.1", "runc", None),
    ("systemd 252 (252.38-1~deb12u1)", "systemd", (252,)), ("systemd 239 (239-78.el8)", "systemd", (239,)),
    ("", "systemd", None), ("systemd", "systemd", None),
], ids=lambda v: str(v))
def test_version(text: str, name: str, version: tuple[int, ...] | None) -> None:
    assert reload.version(text, name) == version


def _levels(findings: list[reload.Finding]) -> list[str]:
    return [f.level for f in findings]


def test_assess_table() -> None:
    nodes = ["/dev/nvidia0"]
    assert _levels(reload.assess((1, 1, 5), (239,), [], [], [], nodes)) == ["ok"]  # no systemd driver: no exposure
    (warn,) = reload.assess((1, 1, 5), (252,), ["docker"], [], [], nodes)
    assert warn.level == "warn" and "runc 1.1.5 (< 1.1.7)" in warn.what and "/dev/nvidia0" in warn.what
    assert "gpuhook system create-dev-char-links" in warn.fix
    (warn,) = reload.assess((1, 1, 12), (239,), ["containerd"], [], [], nodes)
    assert warn.level == "warn" and "systemd 239 (< 240)" in warn.what
    (ok,) = reload.assess((1, 1, 5), (239,), ["docker"], [], [], [])  # every node has its link
    assert ok.level == "ok" and "/dev/char link" in ok.what
    assert _levels(reload.assess((1, 1, 7), (240,), ["docker"], [], [], nodes)) == ["ok"]
    assert _levels(reload.assess(None, (252,), ["crio"], [], [], nodes)) == ["ok"]  # crun: not runc's rule
    hook = reload.assess((1, 1, 12), (252,), ["podman"], [], ["/etc/containers/oci/hooks.d/gpuhook.json"], [])
    assert _levels(hook) == ["ok", "warn"] and "hook mode" in hook[1].what and "gpuhook-runtime" in hook[1].fix
    # the hooks.d file is there, but the engines that run it use cgroupfs: nothing to say about hook mode
    assert _levels(reload.assess((1, 1, 12), (252,), ["docker"], [], ["/x/gpuhook.json"], [])) == ["ok"]
    scoped = reload.assess((1, 1, 12), (252,), [], ["c1"], ["/x/gpuhook.json"], [])
    assert _levels(scoped) == ["ok", "warn"] and "container c1" in scoped[0].what


def _tool(bindir: Path, name: str, line: str) -> None:
    bindir.mkdir(exist_ok=True)
    (bindir / name).write_text(f"#!/bin/sh\necho '{line}'\n")
    (bindir / name).chmod(0o755)


@pytest.fixture
def systemd_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemd is the init; Docker is configured with its cgroup driver; no other engine is installed."""
    (tmp_path / "systemd-system").mkdir()
    monkeypatch.setattr(reload, "SYSTEMD_RUNNING", str(tmp_path / "systemd-system"))
    (tmp_path / "daemon.json").write_text('{"exec-opts": ["native.cgroupdriver=systemd"]}')
    docker, podman = engines.DOCKER, engines.PODMAN
    monkeypatch.setattr(engines, "BUILTIN", (
        replace(docker, config_path=str(tmp_path / "absent"), cgroup=replace(docker.cgroup,
                                                                            path=str(tmp_path / "daemon.json"))),
        replace(podman, config_path=str(tmp_path / "absent"), program="no-such-podman",
                cgroup=replace(podman.cgroup, path=str(tmp_path / "containers.conf")))))
    monkeypatch.setattr(reload, "OTHERS", ())
    monkeypatch.setattr(reload, "HOOK_FILES", (str(tmp_path / "hooks.d/gpuhook.json"),))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return tmp_path


def _reload_findings(host: str, state: Path) -> list[reload.Finding]:
    return [f for f in run_checks(Config(path="c", host_root=host, state_dir=str(state))) if "daemon-reload" in f.what
            or "systemd" in f.what]


@pytest.mark.parametrize(("runc", "systemd", "level"), [
    ("runc version 1.1.5+ds1", "systemd 252 (252.38-1~deb12u1)", "warn"),
    ("runc version 1.1.12", "systemd 239 (239-78.el8)", "warn"),
    ("runc version 1.1.12", "systemd 252 (252.38-1~deb12u1)", "ok"),
], ids=["old-runc", "old-systemd", "both-new"])
def test_doctor_with_faked_versions(systemd_host: Path, fake_host: FakeHost, runc: str, systemd: str,
                                    level: str) -> None:
    _tool(systemd_host / "bin", "runc", runc)
    _tool(systemd_host / "bin", "systemctl", systemd)
    host = fake_host(nvidia=1)
    (finding,) = _reload_findings(host, systemd_host / "state")
    assert finding.level == level, finding
    if level == "warn":
        assert "docker" in finding.what and "/dev/nvidia0" in finding.what
        root = Root(host)
        inventory = discover(root)
        create(root, wanted(n for v in inventory.vendors for n in (*v.shared_nodes, *v.gpus[0].nodes)))
        (after,) = _reload_findings(host, systemd_host / "state")  # the fix it names is the fix
        assert after.level == "ok", after


def test_doctor_warns_about_hook_mode_with_the_systemd_driver(systemd_host: Path, fake_host: FakeHost) -> None:
    _tool(systemd_host / "bin", "runc", "runc version 1.1.12")
    _tool(systemd_host / "bin", "systemctl", "systemd 252 (252.38-1~deb12u1)")
    (systemd_host / "hooks.d").mkdir()
    (systemd_host / "hooks.d/gpuhook.json").write_text("{}")
    host = fake_host(nvidia=1)
    assert [f.level for f in _reload_findings(host, systemd_host / "state")] == ["ok"]  # podman not installed
    (systemd_host / "containers.conf").write_text("[engine]\n")  # now it is, with its default driver
    findings = _reload_findings(host, systemd_host / "state")
    assert [f.level for f in findings] == ["ok", "warn"]
    assert "hook mode" in findings[1].what and "podman" in findings[1].what


def test_no_systemd_no_finding_to_fear(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reload, "SYSTEMD_RUNNING", str(tmp_path / "absent"))
    (finding,) = reload.checks(Config(path="c", host_root=fake_host(nvidia=1), state_dir=str(tmp_path)),
                               discover(Root(fake_host(nvidia=1))))
    assert finding.level == "ok" and "systemd is not the init" in finding.what
