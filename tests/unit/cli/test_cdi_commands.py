"""gpuhook cdi generate (--if-changed, the consumers' versions), cdi validate and doctor's stale-spec report,
through the real command line on simulated hosts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuhook.cli.admin import main
from gpuhook.testing.simulate import HostSpec, build_host

from ...conftest import FakeHost


@pytest.fixture
def host(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = fake_host(nvidia=2, amd=2, nvidia_driver="535.54.03")
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{root}"\nstate_dir = "{tmp_path / "state"}"\n')
    monkeypatch.setenv("GPUHOOK_CONFIG", str(config))
    monkeypatch.setattr("gpuhook.cli.cdi_files.SPEC_DIRS", (str(tmp_path / "etc-cdi"), str(tmp_path / "run-cdi")))
    return root


def test_generate_writes_what_the_installed_podman_parses(host: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "etc-cdi"
    assert main(["cdi", "generate", "--output-dir", str(out), "--engine", "podman=4.3.1",
                 "--engine", "containerd=1.6.20"]) == 0
    said = capsys.readouterr()
    assert "Podman 4.3.1 reads cdiVersion up to 0.5.0 (container-device-interface 0.5.2); containerd 1.6.20 reads " \
           "no CDI specs" in said.out
    assert "the highest Podman 4.3.1 parses, has no additionalGids" in said.err
    amd = json.loads((out / "gpuhook-amd.json").read_text())
    assert amd["cdiVersion"] == "0.5.0" and "additionalGids" not in amd["containerEdits"]
    assert json.loads((out / "gpuhook-nvidia.json").read_text())["cdiVersion"] == "0.5.0"


def test_if_changed_leaves_the_file_until_the_driver_changes(host: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "etc-cdi/gpuhook-nvidia.json"
    args = ["cdi", "generate", "--vendor", "nvidia", "--output", str(spec), "--engine", "none", "--if-changed"]
    assert main(args) == 1 and "etc-cdi does not exist" in capsys.readouterr().err  # no directory made silently
    spec.parent.mkdir()
    assert main(args) == 0
    os.utime(spec, ns=(1_000_000_000, 1_000_000_000))  # an old mtime: any rewrite would show
    assert main(args) == 0 and spec.stat().st_mtime_ns == 1_000_000_000
    assert f"unchanged {spec}: nvidia.com/gpu is as the host has it" in capsys.readouterr().out
    assert main(["doctor"]) in (0, 1)
    assert f"ok    CDI spec {spec} fits the loaded NVIDIA driver" in capsys.readouterr().out
    build_host(host, HostSpec(nvidia=2, amd=2, nvidia_driver="550.54.15"))  # a driver upgrade
    assert main(["doctor"]) == 1
    doctor = capsys.readouterr().out
    assert f"warn  CDI spec {spec} is stale: it mounts" in doctor and "loaded NVIDIA driver 550.54.15" in doctor
    assert f"fix: gpuhook cdi generate --vendor nvidia --output {spec}" in doctor
    assert main(args) == 0 and spec.stat().st_mtime_ns != 1_000_000_000
    assert "libcuda.so.550.54.15" in spec.read_text() and "535.54.03" not in spec.read_text()
    main(["doctor"])
    assert "is stale" not in capsys.readouterr().out


def test_validate_names_what_podman_4_3_hides(host: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "amd.json"
    assert main(["cdi", "generate", "--vendor", "amd", "--output", str(spec), "--cdi-version", "0.7.0",
                 "--engine", "none"]) == 0
    capsys.readouterr()
    assert main(["cdi", "validate", str(spec), "--engine", "podman=4.3.1"]) == 1
    out = capsys.readouterr().out
    assert f'fail  {spec}: Podman 4.3.1 refuses it: unknown field "additionalGids" in containerEdits' in out
    assert main(["cdi", "validate", str(spec), "--engine", "podman=5.1.0", "--engine", "containerd=1.7.24"]) == 0
    assert f"ok    {spec}: amd.com/gpu=0, amd.com/gpu=1" in capsys.readouterr().out


def test_validate_finds_missing_host_files_and_conflicts(host: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec = json.loads(json.dumps({"cdiVersion": "0.5.0", "kind": "example.com/gpu", "devices": [
        {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/null"}], "mounts": [
            {"hostPath": "/nonexistent/libx.so", "containerPath": "/usr/lib/libx.so"}]}}],
        "containerEdits": {"hooks": [{"hookName": "createContainer", "path": "/nonexistent/hook"}]}}))
    d = tmp_path / "run-cdi"
    d.mkdir()
    (d / "a.json").write_text(json.dumps(spec))
    (d / "b.json").write_text(json.dumps(spec))
    (d / "c.yaml").write_text("cdiVersion: 0.5.0\nkind: [\n")
    assert main(["cdi", "validate", "--engine", "podman=4.3.1"]) == 1
    out = capsys.readouterr().out
    assert "the host has no mount source /nonexistent/libx.so" in out and "no hook program /nonexistent/hook" in out
    assert f"{d / 'b.json'}: {d / 'a.json'} defines example.com/gpu=0 too" in out and "not valid YAML" in out


@pytest.mark.parametrize(("name", "text", "says"), [
    ("deep.json", '{"kind": "a.b/c", "devices": ' + "[" * 2000 + "]" * 2000 + "}", "nests deeper than 64 levels"),
    ("deep.yaml", "a: " + "[" * 2000 + "]" * 2000 + "\n", "not"),
    ("fifo.json", None, "not a regular file"),
], ids=["json-2000", "yaml-2000", "fifo"])
def test_a_hostile_spec_file_is_one_cdi_error(tmp_path: Path, name: str, text: str | None, says: str) -> None:
    """Issue 43, 7: a spec in a CDI directory is read bounded in size, depth and file kind."""
    from gpuhook.cli.cdi_files import read_spec
    from gpuhook.errors import CdiError

    path = tmp_path / name
    os.mkfifo(path) if text is None else path.write_text(text)
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    with pytest.raises(CdiError, match=says) as e:
        read_spec(str(path))
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
