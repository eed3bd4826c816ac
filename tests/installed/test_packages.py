"""The self-contained build, the .deb and the .rpm as packaging/ builds them from the export: what dpkg and rpm
install and remove, install.sh --bundle, and the native front ends each carries (the scenarios in test_installed.py
run the packages' builds; test_other_hosts.py runs them on other distributions)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import dpkg_install, rpm_install

NATIVE = ("gpuhook-runtime", "gpuhook-hook", "gpuhook-createhook")


def test_the_binary_carries_its_native_front_ends(binary: Path) -> None:
    for name in NATIVE:
        assert (binary / "bin" / name).read_bytes()[:4] == b"\x7fELF", name
    assert (binary / "bin/.native-sources").read_text().strip()  # doctor compares it with the sources inside
    hook = subprocess.run([binary / "bin/nvidia-container-runtime-hook", "-version"], capture_output=True, text=True)
    assert "compatible with NVIDIA Container Runtime Hook" in hook.stdout  # Docker's --gpus hook is the binary too


def test_deb_installs_with_dpkg(deb: Path, tmp_path: Path, export: Path) -> None:
    root = dpkg_install(deb, tmp_path)
    # Docker's --gpus hook, linked by the postinst where no other package's is
    assert os.readlink(root / "usr/bin/nvidia-container-runtime-hook") == \
        "/opt/gpuhook/bin/nvidia-container-runtime-hook"
    assert "gpuhook cdi generate --if-changed" in (root / "lib/systemd/system/gpuhook-cdi-refresh.service").read_text()
    assert "ExecStart=/usr/bin/gpuhook warm" in (root / "lib/systemd/system/gpuhook-warm.service").read_text()
    assert "systemctl enable gpuhook-warm.service" in (root / "var/lib/dpkg/info/gpuhook.postinst").read_text()
    assert os.readlink(root / "usr/bin/gpuhook-runtime") == "/opt/gpuhook/bin/gpuhook-runtime"
    for name in NATIVE:
        assert (root / "opt/gpuhook/bin" / name).read_bytes()[:4] == b"\x7fELF", name
    assert (root / "etc/gpuhook/config.toml").read_text() == (export / "runtime-config/config.toml").read_text()
    assert "/etc/gpuhook/config.toml" in (root / "var/lib/dpkg/info/gpuhook.conffiles").read_text()
    version = subprocess.run([root / "opt/gpuhook/bin/gpuhook", "version"], capture_output=True, text=True, check=False)
    assert version.stdout.startswith("gpuhook 0.")
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "Depends:" not in control.replace("Pre-Depends", "")  # self-contained: it needs no package
    removed = subprocess.run(["dpkg", f"--root={root}", "--force-script-chrootless", "--purge", "gpuhook"],
                             capture_output=True, text=True, check=False)
    assert removed.returncode == 0, removed.stderr
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*") if not str(p.relative_to(root)).startswith("var"))
    assert not [p for p in left if "gpuhook" in p or "nvidia" in p], left  # clean removal, the hook link too


def test_rpm_installs_and_removes_cleanly(rpm: Path, tmp_path: Path, export: Path) -> None:
    info = subprocess.run(["rpm", "-qp", "--requires", "--provides", str(rpm)], capture_output=True, text=True,
                          check=True).stdout
    assert "libc.so" not in info and "python" not in info  # nothing asked of the host, nothing offered to it
    scripts = subprocess.run(["rpm", "-qp", "--scripts", str(rpm)], capture_output=True, text=True).stdout
    assert "ln -s /opt/gpuhook/bin/nvidia-container-runtime-hook" in scripts and "systemctl enable" in scripts
    root = rpm_install(rpm, tmp_path)
    assert os.readlink(root / "usr/bin/gpuhook-runtime") == "/opt/gpuhook/bin/gpuhook-runtime"
    assert (root / "etc/gpuhook/config.toml").read_text() == (export / "runtime-config/config.toml").read_text()
    assert "ExecStart=/usr/bin/gpuhook warm" in (root / "usr/lib/systemd/system/gpuhook-warm.service").read_text()
    version = subprocess.run([root / "opt/gpuhook/bin/gpuhook", "version"], capture_output=True, text=True)
    assert version.stdout.startswith("gpuhook 0."), version.stderr
    subprocess.run(["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "--noscripts", "-e", "gpuhook"], check=True)
    assert not (root / "opt/gpuhook").exists() and not (root / "usr/bin/gpuhook").exists()


def test_install_sh_takes_the_single_binary(binary: Path, export: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GPUHOOK_PREFIX": str(tmp_path / "opt"), "GPUHOOK_BINDIR": str(tmp_path / "bin"),
           "GPUHOOK_CONFIG": str(tmp_path / "config.toml")}
    r = subprocess.run(["bash", str(export / "install.sh"), "--bundle", str(binary)], env=env, capture_output=True,
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


def test_the_builds_simulated_drivers_react_through_the_build(binary: Path, tmp_path: Path) -> None:
    """A host the self-contained build simulates has stub drivers that call back the build's own Python: an AMD
    partition mode and a MIG layout applied through it re-lay the host as a driver would."""
    host = tmp_path / "host"
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(tmp_path / "c.toml")}
    (tmp_path / "c.toml").write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n')
    made = subprocess.run([binary / "bin/gpuhook", "simulate", "--root", str(host), "--amd", "1", "--nvidia", "1",
                           "--mig", "1g.10gb"], env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    layout = tmp_path / "layout.toml"
    layout.write_text('[[amd]]\ngpus = [0]\ncompute = "DPX"\n[[nvidia]]\ngpus = [0]\nmig = ["3g.40gb", "3g.40gb"]\n')
    done = subprocess.run([binary / "bin/gpuhook", "partition", "apply", str(layout)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run([binary / "bin/gpuhook", "list"], env=env, capture_output=True, text=True,
                            timeout=60).stdout
    assert "DPX 1" in listed and listed.count("3g.40gb") == 2, listed
