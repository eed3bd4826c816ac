"""The engine records say what the name-keyed tables and branches before them said (issue #44, 3): the old tables
and functions are copied here as they were, and each record is held to them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuhook.apply.cdi_readers import version_in
from gpuhook.engines import containerd, containerd_template, crio, docker, podman
from gpuhook.engines.engine import restart
from gpuhook.engines.table import BUILTIN, named, names
from gpuhook.engines.wanted import Wanted

ROOT = Path(__file__).resolve().parents[3]
W = Wanted(shim="/usr/local/bin/gpuhook-runtime", gpuhook="/usr/local/bin/gpuhook-hook",
           config="/etc/gpuhook/config.toml", cdi=True)
ENGINES = ("docker", "containerd", "crio", "podman")
# engines/registration.py
DEFAULT_PATHS = {"docker": "/etc/docker/daemon.json", "containerd": "/etc/containerd/config.toml",
                 "crio": "/etc/crio/crio.conf.d/99-gpuhook.toml",
                 "podman": "/usr/share/containers/oci/hooks.d/gpuhook.json"}
DAEMONS = {"docker": ("dockerd", "docker", "Docker"), "containerd": ("containerd", "containerd", "containerd"),
           "crio": ("CRI-O", "crio", "CRI-O")}
# cli/doctor_engines.py, cli/doctor_reload.py
BINARIES = {"docker": "dockerd", "containerd": "containerd", "crio": "crio", "podman": "podman"}
DRIVER_FILES = {"docker": ("/etc/docker/daemon.json", "dockerd"), "containerd": ("/etc/containerd/config.toml",
                "containerd"), "crio": ("/etc/crio/crio.conf", "crio"),
                "podman": ("/etc/containers/containers.conf", "podman")}
HOOK_ENGINES = ("podman", "crio")
# apply/cdi_readers.py
CDI = {
    "podman": (("podman", "--version"), "Podman", (
        ("4.0.0", "0.2.0"), ("4.1.0", "0.4.0"), ("4.3.0", "0.5.2"), ("4.4.0", "0.5.3"), ("4.5.0", "0.5.4"),
        ("4.7.0", "0.6.1"), ("4.8.0", "0.6.2"), ("5.1.0", "0.7.2"), ("5.2.0", "0.8.0"), ("5.5.0", "1.0.1"))),
    "containerd": (("containerd", "--version"), "containerd", (
        ("1.7.0", "0.5.4"), ("1.7.12", "0.6.1"), ("1.7.13", "0.6.2"), ("1.7.16", "0.7.2"), ("1.7.27", "0.8.1"),
        ("2.0.0", "0.8.0"), ("2.0.3", "0.8.1"), ("2.0.5", "1.0.0"), ("2.1.0", "1.0.1"), ("2.2.1", "1.1.0"))),
    "docker": (("dockerd", "--version"), "Docker", (
        ("25.0.0", "0.6.2"), ("25.0.17", "0.8.1"), ("26.0.0", "0.6.2"), ("26.1.0", "0.7.1"), ("26.1.1", "0.7.2"),
        ("27.4.0", "0.8.0"), ("28.0.1", "0.8.1"), ("28.1.0", "1.0.1"), ("29.5.2", "1.1.0"),
        ("29.8.1", "1.1.1"))),
    "crio": (("crio", "--version"), "CRI-O", (
        ("1.24.0", "0.3.2"), ("1.25.0", "0.5.0"), ("1.25.2", "0.5.2"), ("1.25.5", "0.5.4"), ("1.26.0", "0.5.3"),
        ("1.27.0", "0.5.4"), ("1.28.0", "0.6.0"), ("1.29.0", "0.6.2"), ("1.30.0", "0.7.2"), ("1.31.0", "0.8.0"),
        ("1.32.2", "0.8.1"), ("1.33.0", "1.0.1"), ("1.35.0", "1.1.0"))),
}


def _old_restart(engine: str, reverted: bool, systemd: bool) -> str:
    if engine == "podman":
        return ("no daemon to restart: new Podman containers " + ("no longer run the gpuhook hook" if reverted
                else "with gpuhook.dev/ annotations use the hook"))
    daemon, unit, who = DAEMONS[engine]
    how = f"systemctl restart {unit}" if systemd else f"however {daemon} was started: there is no systemd here"
    what = "drop the gpuhook runtime (containers running on it keep it until they stop)" if reverted else \
        "see the gpuhook runtime"
    return f"restart {daemon} ({how}) for {who} to {what}"


def _old_systemd_driver(engine: str, text: str, cgroup_v2: bool) -> bool:
    flat = "".join(text.split()).lower()
    if engine == "docker":
        return "native.cgroupdriver=systemd" in flat or (cgroup_v2 and "native.cgroupdriver=cgroupfs" not in flat)
    if engine == "containerd":
        return "systemdcgroup=true" in flat
    return 'cgroup_manager="cgroupfs"' not in flat


def _old_render(engine: str, old: str, wanted: Wanted, path: str) -> str:
    if engine == "docker":
        return docker.edit(old, wanted)
    if engine == "containerd":
        if containerd_template.is_template(path, old):
            return containerd_template.edit(old, wanted, path)
        return containerd.edit(old, wanted)
    return crio.render(wanted) if engine == "crio" else podman.render(wanted)


def test_the_engines_and_their_order() -> None:
    assert names() == ENGINES == tuple(e.name for e in BUILTIN)


@pytest.mark.parametrize("name", ENGINES)
def test_each_record_says_what_the_old_tables_said(name: str) -> None:
    engine = named(name)
    assert engine.config_path == DEFAULT_PATHS[name] and engine.program == BINARIES[name]
    assert (engine.cgroup.path, engine.program) == DRIVER_FILES[name]
    assert engine.hooks_d is (name in HOOK_ENGINES)
    if name in DAEMONS:
        assert engine.daemon is not None and (engine.daemon.called, engine.daemon.unit, engine.label) == DAEMONS[name]
    else:
        assert engine.daemon is None
    assert engine.cdi is not None and ((engine.program, "--version"), engine.label, engine.cdi.releases) == CDI[name]
    # configure: docker's features.cdi only on --cdi; containerd's enable_cdi wherever it reads CDI; the rest none
    switch = {"docker": ("features.cdi", False), "containerd": ("enable_cdi", True)}.get(name, ("", False))
    assert (engine.cdi.setting, engine.cdi.automatic) == switch
    assert engine.gpus_hook is (name == "docker")  # doctor's --gpus check was Docker's alone
    assert (engine.rendered_by is not None) is (name == "containerd") and (engine.audit is not None) is (name == "crio")


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize(("reverted", "systemd"), [(False, True), (True, True), (False, False), (True, False)])
def test_restart_hints_are_the_old_ones(name: str, reverted: bool, systemd: bool) -> None:
    assert restart(named(name), reverted, systemd) == _old_restart(name, reverted, systemd)


TEXTS = ["", "{}", '{"exec-opts": ["native.cgroupdriver=systemd"]}', '{"exec-opts":["native.cgroupdriver=cgroupfs"]}',
         '{"exec-opts": ["native.cgroupdriver=systemd", "native.cgroupdriver=cgroupfs"]}',
         "[plugins.x.options]\n  SystemdCgroup = true\n", "SystemdCgroup = false\n",
         '[crio.runtime]\ncgroup_manager = "cgroupfs"\n', '[engine]\ncgroup_manager = "systemd"\n']


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize("v2", [False, True])
def test_cgroup_drivers_read_as_before(name: str, v2: bool) -> None:
    assert [named(name).cgroup.systemd(t, v2) for t in TEXTS] == [_old_systemd_driver(name, t, v2) for t in TEXTS]


RENDERS = [("docker", '{"a": 1}\n', "/etc/docker/daemon.json"), ("docker", "", "/x/daemon.json"),
           ("containerd", "version = 2\n", "/etc/containerd/config.toml"),
           ("containerd", "", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"),
           ("crio", "", DEFAULT_PATHS["crio"]), ("podman", "", DEFAULT_PATHS["podman"])]


@pytest.mark.parametrize(("name", "old", "path"), RENDERS, ids=[f"{r[0]}{i}" for i, r in enumerate(RENDERS)])
def test_render_is_the_old_dispatch(name: str, old: str, path: str) -> None:
    assert named(name).render(old, W, path) == _old_render(name, old, W, path)


def test_only_containerds_templates_are_rendered_by_another_service() -> None:
    tmpl = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl"
    rendered_by = named("containerd").rendered_by
    assert rendered_by is not None and rendered_by(tmpl, "") == containerd_template.restart_hint(tmpl)
    assert rendered_by("/etc/containerd/config.toml", "version = 2\n") == ""


@pytest.mark.parametrize(("text", "ignored"), [
    (b'allowed_annotations = ["gpuhook.dev/gpus"]\n', True), (b'allowed_annotations = ["io.x"]\n', False),
    (b'runtime_path = "/usr/local/bin/gpuhook-runtime"\n', False)], ids=["gpuhook-keys", "other-keys", "none"])
def test_crios_audit_is_the_old_condition(text: bytes, ignored: bool) -> None:
    audit = named("crio").audit
    assert audit is not None and (audit("/p", text) is not None) is ignored


@pytest.mark.parametrize("output", [
    "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1", "containerd containerd.io 1.7.13 7c3aca7",
    "containerd github.com/containerd/containerd/v2 v2.0.2 c507a0", "containerd containerd.io 1.7.0-rc.1 x",
    "garbage"])
def test_containerd_reads_cdi_where_supports_cdi_said(output: str) -> None:
    def supports_cdi(version_output: str) -> bool:  # engines/containerd.py's, before the record
        for word in version_output.split():
            parts = word.lstrip("v").split("~")[0].split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return (int(parts[0]), int(parts[1])) >= (1, 7)
        return False

    version = version_in(output)
    assert (version is not None and bool(named("containerd").reader(version).library)) is supports_cdi(output)


@pytest.mark.parametrize("output", ["Docker version 20.10.24+dfsg1, build 5d6db84", "Docker version 24.0.7, build x",
                                    "Docker version 25.0.3, build y", "Docker version 28.2.2, build z"])
def test_docker_reads_cdi_where_the_major_version_check_said(output: str) -> None:
    words = output.replace(",", " ").split()  # cli/host_commands.py's _docker_reads_cdi, before the record
    refused = int(words[2].split(".")[0]) < 25
    assert (not named("docker").reader(version_in(output) or "").library) is refused


def test_no_engine_name_decides_outside_the_table() -> None:
    """No module but engines/table.py and the editors holds an engine's name as a literal (to compare it, key a dict
    by it or run its program); request/pod.py's are the identities of the engine that wrote a spec (the request
    room's, below the engines)."""
    allowed = {"engines/table.py", "engines/docker.py", "engines/containerd.py", "engines/containerd_template.py",
               "engines/crio.py", "engines/podman.py", "request/pod.py"}
    found = []
    for path in (ROOT / "hook/gpuhook").rglob("*.py"):
        if str(path.relative_to(ROOT / "hook/gpuhook")) in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in (*ENGINES, "dockerd"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []
