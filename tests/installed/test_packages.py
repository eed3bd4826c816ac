"""The .deb and the single binary as packaging/ builds them from the export: what dpkg installs, install.sh --binary,
and the native front ends each carries (the scenarios in test_installed.py run the .deb's binaries)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import dpkg_install

NATIVE = ("gpuhook-runtime", "gpuhook-hook", "gpuhook-createhook")


def test_the_binary_carries_its_native_front_ends(binary: Path) -> None:
    for name in NATIVE:
        assert (binary / name).read_bytes()[:4] == b"\x7fELF", name
    assert (binary / ".native-sources").read_text().strip()  # doctor compares it with the sources inside
    hook = subprocess.run([binary / "nvidia-container-runtime-hook", "-version"], capture_output=True, text=True)
    assert "compatible with NVIDIA Container Runtime Hook" in hook.stdout  # Docker's --gpus hook is the binary too


def test_deb_installs_with_dpkg(deb: Path, tmp_path: Path, export: Path) -> None:
    root = dpkg_install(deb, tmp_path)
    # Docker's --gpus hook, linked by the postinst where no other package's is
    assert os.readlink(root / "usr/bin/nvidia-container-runtime-hook") == "/opt/gpuhook/nvidia-container-runtime-hook"
    assert "gpuhook cdi generate --if-changed" in (root / "lib/systemd/system/gpuhook-cdi-refresh.service").read_text()
    assert os.readlink(root / "usr/bin/gpuhook-runtime") == "/opt/gpuhook/gpuhook-runtime"
    for name in NATIVE:
        assert (root / "opt/gpuhook" / name).read_bytes()[:4] == b"\x7fELF", name
    assert (root / "etc/gpuhook/config.toml").read_text() == (export / "runtime-config/config.toml").read_text()
    assert "/etc/gpuhook/config.toml" in (root / "var/lib/dpkg/info/gpuhook.conffiles").read_text()
    version = subprocess.run([root / "opt/gpuhook/gpuhook", "version"], capture_output=True, text=True, check=False)
    assert version.stdout.startswith("gpuhook 0.")


def test_install_sh_takes_the_single_binary(binary: Path, export: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GPUHOOK_PREFIX": str(tmp_path / "opt"), "GPUHOOK_BINDIR": str(tmp_path / "bin"),
           "GPUHOOK_CONFIG": str(tmp_path / "config.toml")}
    r = subprocess.run(["bash", str(export / "install.sh"), "--binary", str(binary)], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.readlink(tmp_path / "bin/gpuhook") == str(tmp_path / "opt/bin/gpuhook")
    assert os.readlink(tmp_path / "bin/gpuhook-hook") == str(tmp_path / "opt/bin/gpuhook-hook")
    out = subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True, check=False)
    assert out.stdout.startswith("gpuhook ")
    subprocess.run(["bash", str(export / "install.sh"), "--uninstall"], env=env, capture_output=True, check=True)
    assert not (tmp_path / "opt").exists()
