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
    assert "ExecStart=/usr/bin/gpuhook warm" in (root / "lib/systemd/system/gpuhook-warm.service").read_text()
    assert "systemctl enable gpuhook-warm.service" in (root / "var/lib/dpkg/info/gpuhook.postinst").read_text()
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


def test_the_wheel_carries_the_native_sources_and_builds_them(export: Path, tmp_path: Path) -> None:
    """pip's wheel of the export has every native source and header; the launcher module of a venv that installed it
    builds all three front ends from them (what a pip-only user runs, as docs/packaging.md says)."""
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheels"),
                    str(export)], check=True, timeout=300)
    (wheel,) = (tmp_path / "wheels").glob("gpuhook-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    native = {n.rsplit("/", 1)[1] for n in names if n.startswith("gpuhook/cli/native/")}
    assert native == {p.name for p in (export / "hook/gpuhook/cli/native").iterdir()}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    subprocess.run([venv / "bin/pip", "install", "-q", "--no-deps", "--disable-pip-version-check", str(wheel)],
                   check=True, timeout=300)
    built = subprocess.run([venv / "bin/python", "-m", "gpuhook.cli.launcher", "--require-native", str(venv / "bin")],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr
    for name in NATIVE:
        assert (venv / "bin" / name).read_bytes()[:4] == b"\x7fELF", name


def test_the_binarys_simulated_drivers_react_through_the_binary(binary: Path, tmp_path: Path) -> None:
    """A host the single binary simulates has stub drivers that call back the binary itself (simulate-react): an
    AMD partition mode and a MIG layout applied through it re-lay the host as a driver would."""
    host = tmp_path / "host"
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(tmp_path / "c.toml")}
    (tmp_path / "c.toml").write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n')
    made = subprocess.run([binary / "gpuhook", "simulate", "--root", str(host), "--amd", "1", "--nvidia", "1",
                           "--mig", "1g.10gb"], env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    layout = tmp_path / "layout.toml"
    layout.write_text('[[amd]]\ngpus = [0]\ncompute = "DPX"\n[[nvidia]]\ngpus = [0]\nmig = ["3g.40gb", "3g.40gb"]\n')
    done = subprocess.run([binary / "gpuhook", "partition", "apply", str(layout)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run([binary / "gpuhook", "list"], env=env, capture_output=True, text=True, timeout=60).stdout
    assert "DPX 1" in listed and listed.count("3g.40gb") == 2, listed
