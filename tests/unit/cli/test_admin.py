"""Admin commands answer ordinary bad input with one line on stderr and exit 1, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhook.cli.admin import main

from ...conftest import FakeHost

HOOK = str(Path(__file__).resolve().parents[3] / "hook")


def _gpuhook(args: list[str], config: Path) -> subprocess.CompletedProcess[str]:
    """The real command line, as its launcher starts it."""
    code = f"import sys\nsys.path.insert(0, {HOOK!r})\nfrom gpuhook.cli.admin import main\nsys.exit(main())"
    return subprocess.run([sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})


@pytest.fixture
def config(fake_host: FakeHost, tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'host_root = "{fake_host(nvidia=1, amd=1)}"\nstate_dir = "{tmp_path / "state"}"\n')
    return path


@pytest.mark.parametrize("args", [["labels", "--output", "/proc/nonexistent/x"],
                                  ["cdi", "generate", "--output-dir", "/proc/nonexistent"],
                                  ["configure", "docker", "--config-path", "/proc/nonexistent/daemon.json"]],
                         ids=["labels", "cdi-generate", "configure"])
def test_unwritable_or_missing_paths_are_one_line(config: Path, args: list[str]) -> None:
    done = _gpuhook(args, config)
    assert done.returncode == 1, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("gpuhook: cannot write /proc/nonexistent")


def test_a_malformed_cdi_spec_is_named_and_the_others_still_listed(config: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "cdi"
    specs.mkdir()
    (specs / "gpuhook-amd.json").write_text('{"cdiVersion": "0.7.0", "kind": "amd.com/gpu", "devices": [{"na')
    (specs / "gpuhook-other.json").write_text('{"kind": "x.com/gpu", "devices": [{"nope": 1}]}')
    (specs / "gpuhook-nvidia.json").write_text(json.dumps({"kind": "nvidia.com/gpu", "devices": [{"name": "0"}]}))
    assert main(["cdi", "list", "--spec-dir", str(specs)]) == 1
    out, err = capsys.readouterr()
    assert out == "nvidia.com/gpu=0\n"
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "gpuhook-amd.json: not valid JSON" in lines[0] and "a device without a name" in lines[1]
    assert all("gpuhook cdi generate" in line for line in lines)
    done = _gpuhook(["cdi", "list", "--spec-dir", str(specs)], config)
    assert done.returncode == 1 and "Traceback" not in done.stderr


def test_a_broken_config_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("host_root = [\n")
    for args in (["list"], ["gc"], ["labels", "--output", "-"]):
        done = _gpuhook(args, bad)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"gpuhook: config {bad} is not valid TOML")
    doctor = _gpuhook(["doctor"], bad)  # a failed check, as monitoring reads it: exit 2, its finding and fix
    assert doctor.returncode == 2 and not doctor.stderr
    assert doctor.stdout.startswith(f"fail  config {bad} is not valid TOML") and "fix: " in doctor.stdout


@pytest.mark.parametrize(("rest", "expect"), [([], ""), (["--kubelet-dir", "/k"], "/k"), (["--kubelet-dir=/k"], "/k"),
                                              (["--kubelet-dir"], None), (["--kubelet-dir="], None),
                                              (["--help"], None), (["--kubelet-dir", "-x"], None)],
                         ids=["none", "space", "equals", "missing", "empty", "help", "flag as value"])
def test_the_device_plugin_command_line_is_read_without_argparse(rest: list[str], expect: str | None) -> None:
    """The daemon's own path skips argparse (and what it loads); anything else goes to argparse, which says."""
    from gpuhook.cli.admin import _kubelet_dir

    assert _kubelet_dir(rest) == expect
