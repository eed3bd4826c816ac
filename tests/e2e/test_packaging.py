"""The PyInstaller binary and the .deb build from this checkout and pass a smoke run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhook.testing.bundle import make_bundle, oci_config

REPO = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def binary() -> Path:
    shutil.rmtree(REPO / "dist", ignore_errors=True)
    r = subprocess.run(["bash", str(REPO / "packaging/build-binary.sh")], capture_output=True, text=True, timeout=900,
                       check=False, env={**os.environ, "PYTHON": sys.executable})
    assert r.returncode == 0, r.stdout + r.stderr
    return REPO / "dist/gpuhook"


def test_one_executable_is_cli_shim_and_hook(binary: Path, tmp_path: Path, base_rootfs: str) -> None:
    assert subprocess.run([binary / "gpuhook", "version"], capture_output=True, text=True).stdout.startswith("gpuhook")
    host = tmp_path / "host"
    r = subprocess.run([binary / "gpuhook", "simulate", "--nvidia", "1", "--amd", "1", "--root", str(host)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr  # stubs and the amdsmi symbol list come from inside the frozen app
    config = tmp_path / "c.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n')
    bundle = tmp_path / "b"
    make_bundle(str(bundle), oci_config(["sh", "-c", "ls /dev | grep nvidia; dlopen-probe libcuda.so.1"],
                                        annotations={"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia",
                                                     "gpuhook.dev/clocks": "1500"}), base_rootfs)
    run = subprocess.run([binary / "gpuhook-runtime", "run", "--bundle", str(bundle), f"bin-{os.getpid()}"],
                         env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert "nvidia0" in run.stdout and "dlopen libcuda.so.1 ok" in run.stdout
    # the tuning hooks the binary's shim added ran the binary too: set for the container's life, then reset
    assert (host / "var/lib/gpuhook-sim/nvml.log").read_text().split()[::4] == ["set-clocks", "reset-clocks"]
    spec = json.loads((bundle / "config.json").read_text())
    # the hooks' native front end, beside the binary, which it runs (no warm helper here)
    assert spec["hooks"]["prestart"][0]["path"] == str(binary / "gpuhook-hook")
    hook = subprocess.run([binary / "nvidia-container-runtime-hook", "-version"], capture_output=True, text=True)
    assert "compatible with NVIDIA Container Runtime Hook" in hook.stdout  # Docker's --gpus hook is the binary too


def test_deb_installs_with_dpkg(binary: Path, tmp_path: Path) -> None:
    r = subprocess.run(["bash", str(REPO / "packaging/build-deb.sh")], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    (deb,) = (REPO / "dist").glob("gpuhook_*.deb")
    root = tmp_path / "root"
    (root / "var/lib/dpkg/updates").mkdir(parents=True)
    (root / "var/lib/dpkg/info").mkdir()
    (root / "var/lib/dpkg/status").touch()
    inst = subprocess.run(["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless", "-i", str(deb)],
                          capture_output=True, text=True, check=False)  # the maintainer scripts act on DPKG_ROOT
    assert inst.returncode == 0, inst.stderr
    # Docker's --gpus hook, linked by the postinst where no other package's is
    assert os.readlink(root / "usr/bin/nvidia-container-runtime-hook") == "/opt/gpuhook/nvidia-container-runtime-hook"
    assert "gpuhook cdi generate --if-changed" in (root / "lib/systemd/system/gpuhook-cdi-refresh.service").read_text()
    assert os.readlink(root / "usr/bin/gpuhook-runtime") == "/opt/gpuhook/gpuhook-runtime"
    assert (root / "etc/gpuhook/config.toml").read_text() == (REPO / "runtime-config/config.toml").read_text()
    assert "/etc/gpuhook/config.toml" in (root / "var/lib/dpkg/info/gpuhook.conffiles").read_text()
    version = subprocess.run([root / "opt/gpuhook/gpuhook", "version"], capture_output=True, text=True, check=False)
    assert version.stdout.startswith("gpuhook 0.")


def test_install_sh_takes_the_single_binary(binary: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GPUHOOK_PREFIX": str(tmp_path / "opt"), "GPUHOOK_BINDIR": str(tmp_path / "bin")}
    r = subprocess.run(["bash", str(REPO / "install.sh"), "--binary", str(binary)], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.readlink(tmp_path / "bin/gpuhook") == str(tmp_path / "opt/bin/gpuhook")
    out = subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True, check=False)
    assert out.stdout.startswith("gpuhook ")
    subprocess.run(["bash", str(REPO / "install.sh"), "--uninstall"], env=env, capture_output=True, check=True)
    assert not (tmp_path / "opt").exists()
