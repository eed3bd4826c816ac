"""gpuhook configure: round trips on real-world engine configs, idempotence, revert to the original bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuhook.cli import admin as cli
from gpuhook.engines.files import configure, revert
from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError

W = Wanted(shim="/usr/local/bin/gpuhook-runtime", gpuhook="/usr/local/bin/gpuhook", config="/etc/gpuhook/config.toml")

DOCKER = """{
  "data-root": "/srv/docker",
  "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}},
  "features": {"buildkit": true},
  "log-opts": {"max-size": "10m"}
}
"""
CONTAINERD_V2 = """# /etc/containerd/config.toml, as kubeadm hosts have it
version = 2
root = "/var/lib/containerd"  # keep this comment

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      # runc, the default
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
"""
CONTAINERD_V3 = """version = 3
# containerd 2.x layout
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
"""


def test_docker_keeps_every_other_key(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(DOCKER)
    configure("docker", str(path), Wanted(shim=W.shim, gpuhook=W.gpuhook, config=W.config, set_default=True, cdi=True))
    data = json.loads(path.read_text())
    assert data["runtimes"] == {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []},
                                "gpuhook": {"path": "/usr/local/bin/gpuhook-runtime"}}
    assert data["default-runtime"] == "gpuhook"
    assert data["features"] == {"buildkit": True, "cdi": True}  # merged, not clobbered
    assert data["data-root"] == "/srv/docker" and data["log-opts"] == {"max-size": "10m"}


def test_docker_without_cdi_leaves_features_alone(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(DOCKER)
    configure("docker", str(path), W)
    assert json.loads(path.read_text())["features"] == {"buildkit": True}
    assert "default-runtime" not in json.loads(path.read_text())


@pytest.mark.parametrize(("text", "table"), [(CONTAINERD_V2, "io.containerd.grpc.v1.cri"),
                                             (CONTAINERD_V3, "io.containerd.cri.v1.runtime")], ids=["v2", "v3"])
def test_containerd_keeps_comments_and_settings(tmp_path: Path, text: str, table: str) -> None:
    import tomllib

    path = tmp_path / "config.toml"
    path.write_text(text)
    configure("containerd", str(path), Wanted(shim=W.shim, gpuhook=W.gpuhook, config=W.config, set_default=True))
    new = path.read_text()
    for line in text.splitlines():
        if "default_runtime_name" not in line:
            assert line in new  # every original line, comments included, is still there
    cri = tomllib.loads(new)["plugins"][table]["containerd"]
    runtime = cri["runtimes"]["gpuhook"]
    assert runtime["container_annotations"] == ["gpuhook.dev/allocation"]
    assert "gpuhook.dev/gpus" in runtime["pod_annotations"] and "gpuhook.dev/clocks" in runtime["pod_annotations"]
    assert {k: v for k, v in runtime.items() if not k.endswith("_annotations")} == {
        "runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/local/bin/gpuhook-runtime"}}
    assert cri["default_runtime_name"] == "gpuhook"


def test_containerd_pod_annotations_are_every_key_but_the_allocation() -> None:
    """A pod annotation never poses as the device plugin's allocation: containerd's filter is the gate (a
    wildcard would let gpuhook.dev/allocation through from the pod)."""
    import tomllib

    from gpuhook.engines.containerd import edit
    from tests.unit.parsing import parse_request

    runtime = tomllib.loads(edit("version = 2\n", W))["plugins"]["io.containerd.grpc.v1.cri"]["containerd"][
        "runtimes"]["gpuhook"]
    pod = runtime["pod_annotations"]
    assert "gpuhook.dev/allocation" not in pod and not any("*" in k for k in pod)
    for key in pod:  # every key named is one the request parser knows (an unknown one is refused)
        try:
            parse_request({key: "x"}, {})
        except Exception as e:
            assert "unknown annotation" not in str(e), key


@pytest.mark.parametrize(("output", "cdi"), [
    ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1", False),
    ("containerd containerd.io 1.7.13 7c3aca7", True),
    ("containerd github.com/containerd/containerd/v2 v2.0.2 c507a0", True),
    ("garbage", False)], ids=["1.6", "1.7", "2.0", "garbage"])
def test_cdi_is_turned_on_from_containerd_1_7(output: str, cdi: bool) -> None:
    import tomllib

    from gpuhook.apply.cdi_readers import version_in
    from gpuhook.engines.containerd import edit
    from gpuhook.engines.table import CONTAINERD

    assert bool(CONTAINERD.reader(version_in(output) or "0").library) is cdi
    toml = tomllib.loads(edit("version = 2\n", Wanted(shim=W.shim, gpuhook=W.gpuhook, config=W.config, cdi=cdi)))
    assert toml["plugins"]["io.containerd.grpc.v1.cri"].get("enable_cdi", False) is cdi


def test_containerd_v1_is_refused_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[plugins.cri]\nsandbox_image = "x"\n')
    with pytest.raises(EngineConfigError, match="containerd config migrate"):
        configure("containerd", str(path), W)
    assert path.read_text() == '[plugins.cri]\nsandbox_image = "x"\n'


def test_crio_drop_in_and_podman_hook(tmp_path: Path) -> None:
    import tomllib

    from gpuhook.engines import crio as crio_engine

    crio, hook = tmp_path / "crio.conf.d/99-gpuhook.toml", tmp_path / "hooks.d/gpuhook.json"
    configure("crio", str(crio), W)
    runtime = tomllib.loads(crio.read_text())["crio"]["runtime"]["runtimes"]["gpuhook"]
    # no allowed_annotations: CRI-O ignores a handler that lists a key of anyone else's (test_crio.py runs it)
    assert runtime == {"runtime_path": W.shim, "runtime_type": "oci"}  # the default config: nothing to name
    other = tmp_path / "other/99-gpuhook.toml"
    configure("crio", str(other), Wanted(shim=W.shim, gpuhook=W.gpuhook, config="/srv/gpuhook.toml"))
    named = tomllib.loads(other.read_text())["crio"]["runtime"]["runtimes"]["gpuhook"]["monitor_env"]
    assert named == [f"PATH={crio_engine._PATH}", "GPUHOOK_CONFIG=/srv/gpuhook.toml"]
    configure("podman", str(hook), W)
    shipped = json.loads((Path(__file__).parents[3] / "runtime-config/hooks.d/gpuhook.json").read_text())
    assert json.loads(hook.read_text()) == shipped  # the same file as shipped, for the installed paths


@pytest.mark.parametrize(("engine", "text"), [("docker", DOCKER), ("containerd", CONTAINERD_V2),
                                              ("crio", None), ("podman", None)])
def test_twice_is_once_and_revert_restores_the_original_bytes(tmp_path: Path, engine: str, text: str | None) -> None:
    path = tmp_path / "engine.conf"
    if text is not None:
        path.write_text(text)
        os.chmod(path, 0o600)
    first = configure(engine, str(path), W)
    after_first = path.read_bytes()
    second = configure(engine, str(path), W)
    assert first.changed and not second.changed and path.read_bytes() == after_first
    reverted = revert(engine, str(path))
    assert reverted.changed
    if text is None:
        assert not path.exists()
    else:
        assert path.read_text() == text and oct(path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == ([] if text is None else ["engine.conf"])  # no leftovers


def test_dry_run_writes_nothing_and_shows_the_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(DOCKER)
    assert cli.main(["configure", "docker", "--config-path", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert '+    "gpuhook": {' in out and "dry run" in out
    assert path.read_text() == DOCKER and not (tmp_path / "daemon.json.gpuhook-orig").exists()


def test_cli_says_which_daemon_to_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONTAINERD_V2)
    systemd = os.path.isdir("/run/systemd/system")
    assert cli.main(["configure", "containerd", "--config-path", str(path)]) == 0
    said = capsys.readouterr().out
    assert "restart containerd" in said and "to see the gpuhook runtime" in said
    assert ("systemctl restart containerd" in said) == systemd  # systemctl only where systemd runs
    assert cli.main(["configure", "containerd", "--config-path", str(path), "--revert"]) == 0
    said = capsys.readouterr().out
    assert "to drop the gpuhook runtime" in said and "to see" not in said
    assert path.read_text() == CONTAINERD_V2


@pytest.mark.parametrize(("systemd", "reverted", "says"), [
    (True, False, "restart dockerd (systemctl restart docker) for Docker to see the gpuhook runtime"),
    (False, False, "restart dockerd (however dockerd was started: there is no systemd here) for Docker to see"),
    (True, True, "restart dockerd (systemctl restart docker) for Docker to drop the gpuhook runtime"),
], ids=["systemd", "no systemd", "revert"])
def test_restart_hint(systemd: bool, reverted: bool, says: str) -> None:
    from gpuhook.engines.engine import restart
    from gpuhook.engines.table import DOCKER

    assert restart(DOCKER, reverted, systemd).startswith(says)


def test_broken_daemon_json_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text('{"runtimes": ')
    with pytest.raises(EngineConfigError, match="not valid JSON"):
        configure("docker", str(path), W)
    assert path.read_text() == '{"runtimes": ' and not (tmp_path / "daemon.json.gpuhook-orig").exists()


@pytest.mark.parametrize(("text", "says"), [
    ('{"x": ' + "[" * 2000 + "]" * 2000 + "}", "nests deeper than 64 levels"),
    ('{"runtimes": ["runc"]}', "runtimes is not an object"),
], ids=["deep", "runtimes-a-list"])
def test_a_hostile_daemon_json_is_one_line(text: str, says: str) -> None:
    """Issue 43, 7: the admin's daemon.json is read bounded in depth and shape, never a traceback."""
    from gpuhook.engines import docker

    with pytest.raises(EngineConfigError, match=says):
        docker.edit(text, Wanted(shim="/usr/local/bin/gpuhook-runtime", gpuhook="/usr/local/bin/gpuhook", config=""))


CDI_CASES = [  # (engine, its `--version` (None: not installed), --cdi, CDI turned on)
    ("docker", "Docker version 25.0.3, build 4debf41", True, True),
    ("docker", "Docker version 25.0.3, build 4debf41", False, False),
    ("docker", None, True, True),  # no dockerd here: the file may be for another host's, not judged
    ("containerd", "containerd containerd.io 1.7.13 7c3aca7", False, True),
    ("containerd", "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1", False, False),
    ("containerd", "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1", True, True),
    ("containerd", None, False, False),
    ("crio", "crio version 1.28.1", True, True), ("podman", "podman version 4.3.1", False, False),
]


@pytest.mark.parametrize(("engine", "output", "asked", "cdi"), CDI_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CDI_CASES)])
def test_configure_turns_cdi_on_where_the_record_says(tmp_path: Path, engine: str, output: str | None, asked: bool,
                                                      cdi: bool) -> None:
    from gpuhook.cli.host_commands import _cdi
    from gpuhook.engines.table import named
    from gpuhook.frozen import replace

    program = tmp_path / "program"
    if output is not None:
        program.write_text(f"#!/bin/sh\necho '{output}'\n")
        program.chmod(0o755)
    assert _cdi(replace(named(engine), program=str(program)), asked) is cdi


def test_cdi_for_a_docker_that_reads_none_is_refused(tmp_path: Path) -> None:
    from gpuhook.cli.host_commands import _cdi
    from gpuhook.engines.table import DOCKER
    from gpuhook.frozen import replace

    program = tmp_path / "dockerd"
    program.write_text("#!/bin/sh\necho 'Docker version 20.10.24+dfsg1, build 5d6db84'\n")
    program.chmod(0o755)
    with pytest.raises(EngineConfigError, match=r"^--cdi: Docker 20\.10\.24 reads no CDI specs \(features\.cdi needs "
                                                r"Docker 25 or later\); nothing was changed: drop --cdi"):
        _cdi(replace(DOCKER, program=str(program)), True)
