"""install.sh from a clean export, into scratch prefixes: install, --configure podman, reinstall, --uninstall; Docker's
--gpus hook told from NVIDIA's by what it is, whatever an earlier install on this host left; the release tarball
offline. Nothing here depends on what is installed on the host (config and links stay in the test's own dirs)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

HOOKS = Path("/usr/share/containers/oci/hooks.d/gpuhook.json")
HOOK = "nvidia-container-runtime-hook"


def _env(tmp: Path, name: str = "opt", bindir: str = "bin") -> dict[str, str]:
    return {**os.environ, "GPUHOOK_PREFIX": str(tmp / name), "GPUHOOK_BINDIR": str(tmp / bindir),
            "GPUHOOK_CONFIG": str(tmp / "config.toml"), "GPUHOOK_UNITDIR": str(tmp / "units")}


def _install(src: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(src / "install.sh"), *flags], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def test_install_configure_uninstall(export: Path, tmp_path: Path) -> None:
    before = HOOKS.read_bytes() if HOOKS.exists() else None
    env = _env(tmp_path)
    r = _install(export, env, "--configure", "podman")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        version = subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True)
        assert version.stdout.startswith("gpuhook ")
        hook = json.loads(HOOKS.read_text())
        assert hook["hook"]["path"] == str(tmp_path / "bin/gpuhook-hook") and "prestart" in hook["stages"]
        assert (tmp_path / "config.toml").exists()  # the config where it was told, not /etc
        unit = tmp_path / "units/gpuhook-warm.service"  # the warm helper, on by default
        assert f"ExecStart={tmp_path}/bin/gpuhook warm" in unit.read_text()
        again = _install(export, env, "--no-warm")
        assert again.returncode == 0, again.stderr  # idempotent, and the helper turned off
        assert not unit.exists() and "disabled the warm helper" in again.stdout
    finally:
        out = _install(export, env, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert (HOOKS.read_bytes() if HOOKS.exists() else None) == before  # the engine's file is as it was
    assert not (tmp_path / "opt").exists() and not list((tmp_path / "bin").iterdir())


def test_the_gpus_hook_is_told_from_nvidias_by_what_it_is(export: Path, tmp_path: Path) -> None:
    """An earlier gpuhook's link (another prefix) is gpuhook's, and replaced; NVIDIA's toolkit's hook is kept."""
    first = _install(export, _env(tmp_path, "first"))
    assert first.returncode == 0, first.stderr
    assert os.readlink(tmp_path / f"bin/{HOOK}") == str(tmp_path / f"first/bin/{HOOK}")
    second = _install(export, _env(tmp_path, "second"))
    assert second.returncode == 0, second.stderr
    assert "kept" not in second.stdout, second.stdout
    assert os.readlink(tmp_path / f"bin/{HOOK}") == str(tmp_path / f"second/bin/{HOOK}")
    nvidia = tmp_path / "nvidia-bin"
    nvidia.mkdir()
    theirs = nvidia / HOOK
    theirs.write_text("#!/bin/sh\n# NVIDIA Container Runtime Hook\nexit 0\n")
    theirs.chmod(0o755)
    third = _install(export, _env(tmp_path, "third", bindir="nvidia-bin"))
    assert third.returncode == 0, third.stderr
    assert f"kept {theirs} (NVIDIA's container toolkit)" in third.stdout
    assert theirs.read_text().startswith("#!/bin/sh\n# NVIDIA") and not theirs.is_symlink()


def test_a_native_build_failure_stops_the_install(export: Path, tmp_path: Path) -> None:
    """No C compiler on PATH: one line and exit 1, unless --no-native; then every entry point is Python."""
    bare = tmp_path / "path"
    bare.mkdir()
    for tool in ("bash", "python3", "dpkg", "readlink", "basename", "head", "grep", "date", "cut", "ln", "rm",
                 "mkdir", "install", "sed", "sort", "tr", "id", "dirname", "cat", "uname", "runc"):
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if real:
            (bare / tool).symlink_to(real)
    env = {**_env(tmp_path), "PATH": str(bare)}
    failed = _install(export, env)
    assert failed.returncode == 1
    said = [ln for ln in failed.stderr.splitlines() if ln.strip()]
    assert len(said) == 1 and "no C compiler" in said[0] and "--no-native" in said[0], failed.stderr
    done = _install(export, env, "--no-native")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "units/gpuhook-warm.service").exists()  # nothing would call it
    with open(tmp_path / "bin/gpuhook-runtime", "rb") as f:
        assert f.read(2) == b"#!"  # the Python shim itself
    assert not (tmp_path / "bin/gpuhook-hook").exists()


def test_release_tarball_installs_offline(release: Path, tmp_path: Path) -> None:
    """The source tarball packs the pinned wheels; install.sh then installs with --no-index (no registry)."""
    (tarball,) = release.glob("gpuhook-*-src.tar.gz")
    subprocess.run(["tar", "-C", str(tmp_path), "-xzf", str(tarball)], check=True)
    (src,) = tmp_path.glob("gpuhook-*")
    assert list((src / "packaging/wheels").glob("jsonschema-*.whl"))
    env = {**_env(tmp_path), "PIP_INDEX_URL": "http://127.0.0.1:9/none"}  # any attempt to reach a registry fails
    inst = _install(src, env)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    assert subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True).returncode == 0
    assert (tmp_path / "opt/bin/gpuhook-runtime").read_bytes()[:4] == b"\x7fELF"  # the tarball builds them too
    subprocess.run(["bash", str(src / "install.sh"), "--uninstall"], env=env, capture_output=True, check=True)


def test_the_self_contained_tarball_installs_without_python(release: Path, tmp_path: Path) -> None:
    """The release tarball of this architecture, unpacked, installs with its own install.sh on a PATH with no python3,
    cc, pip or apt-get: nothing of the host's userland but a shell and coreutils is used, and what it installed runs."""
    (tarball,) = release.glob(f"gpuhook-*-linux-{os.uname().machine}.tar.gz")
    subprocess.run(["tar", "-C", str(tmp_path), "-xzf", str(tarball)], check=True)
    (src,) = tmp_path.glob("gpuhook-*")
    bare = tmp_path / "path"
    bare.mkdir()
    for tool in ("bash", "sh", "readlink", "basename", "head", "grep", "date", "cut", "ln", "rm", "mkdir", "install",
                 "sed", "sort", "tr", "id", "dirname", "cat", "cp", "mv", "uname", "mktemp", "tar", "gzip", "runc"):
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if real:
            (bare / tool).symlink_to(real)
    env = {**_env(tmp_path), "PATH": str(bare)}
    inst = _install(src, env)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    assert "installing the self-contained build" in inst.stdout
    version = subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True, env=env)
    assert version.stdout.startswith("gpuhook "), version.stderr
    for name in ("gpuhook-runtime", "gpuhook-hook", "gpuhook-createhook"):
        assert (tmp_path / "opt/bin" / name).read_bytes()[:4] == b"\x7fELF", name
    out = _install(src, env, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "opt").exists() and not list((tmp_path / "bin").iterdir())
    (other,) = release.glob("gpuhook-*-aarch64")
    wrong = _install(src, env, "--bundle", str(other))
    said = [ln for ln in wrong.stderr.splitlines() if ln.strip()]
    assert wrong.returncode == 1 and len(said) == 1 and "for aarch64, and this host is x86_64" in said[0], wrong.stderr
