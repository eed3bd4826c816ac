"""The native front end: pass-through without Python once the fast file is there; everything else to Python."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gpuhook.cli.launcher import write_launchers
from gpuhook.configfile import CACHE_DIR
from gpuhook.testing.bundle import make_bundle, oci_config

from .conftest import HOOK_DIR


@pytest.fixture
def front(tmp_path: Path, base_rootfs: str, mixed_host: str):  # type: ignore[no-untyped-def]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    launchers = write_launchers(str(bindir), sys.executable, [HOOK_DIR, sysconfig.get_paths()["purelib"]])
    assert Path(launchers["gpuhook-runtime"]).read_bytes()[:4] == b"\x7fELF"  # the native front end was built
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{mixed_host}"\nstate_dir = "{tmp_path}/state"\n')
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}
    marker = tmp_path / "python-started"

    def run(annotations: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        b = tmp_path / f"b{len(list(tmp_path.glob('b*')))}"
        make_bundle(str(b), oci_config(["sh", "-c", "ls /dev"], annotations=annotations), base_rootfs)
        cid = f"fe-{b.name}-{os.getpid()}"
        return subprocess.run([launchers["gpuhook-runtime"], *args, "run", "--bundle", str(b), cid],
                              env=env, capture_output=True, text=True, timeout=60, check=False)

    def trap_python() -> None:
        """From now on the Python shim only leaves a marker and fails: what still works never started it."""
        py = bindir / "gpuhook-runtime-py"
        py.write_text(f"#!/bin/sh\ntouch {marker}\nexit 3\n")

    return run, trap_python, marker, config, bindir


def test_pass_through_without_python_once_the_fast_file_exists(front) -> None:  # type: ignore[no-untyped-def]
    run, trap_python, marker, _, _ = front
    assert run().returncode == 0  # the first container goes through Python, which writes the fast file
    trap_python()
    r = run()
    assert r.returncode == 0 and "nvidia" not in r.stdout, r.stderr
    assert not marker.exists()
    r = run(args=("--log-format", "json"))  # global flags before the command are skipped correctly
    assert r.returncode == 0 and not marker.exists(), r.stderr


@pytest.mark.parametrize("annotations", [{"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"},
                                         {"io.example/x": "NVIDIA_VISIBLE_DEVICES"}], ids=["annotation", "env marker"])
def test_requests_go_to_python(front, annotations: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    run, trap_python, marker, _, _ = front
    assert run().returncode == 0
    trap_python()
    r = run(annotations)
    assert r.returncode == 3 and marker.exists()


def test_a_changed_config_goes_to_python_which_refreshes(front) -> None:  # type: ignore[no-untyped-def]
    run, trap_python, marker, config, _ = front
    assert run().returncode == 0
    config.write_text(config.read_text() + "\n# changed\n")
    trap_python()
    assert run().returncode == 3 and marker.exists()


def test_an_untrusted_fast_file_is_ignored(front) -> None:  # type: ignore[no-untyped-def]
    run, trap_python, marker, config, _ = front
    assert run().returncode == 0
    fast = Path(CACHE_DIR) / (str(config).replace("%", "%25").replace("/", "%2F") + ".fast")
    assert fast.exists()
    os.chmod(fast, 0o666)
    trap_python()
    assert run().returncode == 3 and marker.exists()
    os.chmod(fast, 0o600)


def test_the_front_end_is_never_its_own_runtime(front, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run, _, _, config, bindir = front
    config.write_text(config.read_text() + f'runtime = "{bindir}/gpuhook-runtime"\n')
    r = run()
    assert r.returncode != 0 and "is gpuhook-runtime itself" in r.stderr
