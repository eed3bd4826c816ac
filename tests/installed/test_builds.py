"""The self-contained builds of both architectures (packaging/build-release.sh), checked as a host would meet them:
what their ELF files ask of the host, read by binutils' readelf (not by the build's own checker); the arm64 build's
commands run under qemu-user (binfmt_misc, so that every exec of the build is emulated as on a Grace node); and
install.sh on a Debian 11 host whose python3 is 3.9 (hosts.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import hosts

ARCHES = ("x86_64", "aarch64")
GLIBC_OF_THE_BUILD = (2, 36)  # Debian 12's, carried in lib/ (docs/packaging.md, "Supported hosts")


def _readelf(*args: str) -> str:
    return subprocess.run(["readelf", "-W", *args], capture_output=True, text=True, check=False).stdout


def _elves(build: Path) -> Iterator[Path]:
    for path in sorted(build.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


@pytest.mark.parametrize("arch", ARCHES)
def test_nothing_in_the_build_needs_the_hosts_glibc(release: Path, arch: str) -> None:
    """Every executable in bin/ is static (no loader, no library); every other ELF needs only libraries the build
    carries and no glibc symbol version above the build's own C library, whose loader runs it."""
    (build,) = release.glob(f"gpuhook-*-{arch}")
    carried = {p.name for p in (build / "lib").iterdir()}
    problems, seen = [], 0
    for path in _elves(build):
        seen += 1
        rel = str(path.relative_to(build))
        dynamic = _readelf("-d", str(path))
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", dynamic)
        interp = "Requesting program interpreter" in _readelf("-l", str(path))
        versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)",
                                                                            _readelf("-V", str(path)))}
        if rel.startswith("bin/"):
            if needed or interp:
                problems.append(f"{rel}: dynamic ({needed})")
        elif rel != "lib/libc.so.6" and versions and max(versions) > GLIBC_OF_THE_BUILD:
            problems.append(f"{rel}: needs GLIBC_{max(versions)}")
        problems += [f"{rel}: needs {lib}, not carried" for lib in needed if lib not in carried]
    assert seen > 50 and not problems, problems
    libc = _readelf("-V", str(build / "lib/libc.so.6"))
    assert f"GLIBC_{GLIBC_OF_THE_BUILD[0]}.{GLIBC_OF_THE_BUILD[1]}" in libc  # the build carries what it is run with
    bad = [str(p) for p in build.rglob("*") if p.is_symlink() and not p.resolve().is_relative_to(build.resolve())]
    assert not bad, bad  # no link leads out of the build (Debian's sitecustomize did)


@pytest.fixture(scope="module")
def emulated() -> None:
    """Arm64 executables run through qemu-user-static's binfmt_misc entry (registered if it is not)."""
    entry = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if not entry.exists():
        if not Path("/proc/sys/fs/binfmt_misc/register").exists():
            subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"], check=True)
        subprocess.run(["update-binfmts", "--enable", "qemu-aarch64"], capture_output=True, check=False)
    assert entry.exists() and "enabled" in entry.read_text(), "qemu-aarch64 is not registered with binfmt_misc"


def test_the_arm64_build_under_emulation(release: Path, emulated: None, tmp_path: Path) -> None:
    """The arm64 build's --version, simulate, list, cdi generate and doctor, and its native front end's
    pass-through, as an arm64 host runs them: every process in them is an arm64 one (qemu through binfmt)."""
    (build,) = release.glob("gpuhook-*-aarch64")
    machine = subprocess.run([build / "bin/python3", "-c", "import platform; print(platform.machine())"],
                             capture_output=True, text=True, timeout=120, check=False)
    assert machine.stdout.strip() == "aarch64", machine.stderr
    config = tmp_path / "config.toml"
    host = tmp_path / "host"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\nruntime = "{tmp_path}/runc"\n')
    # the stubs of the simulated host are arm64 too: zig (the build's compiler) makes them
    zig = Path(os.environ.get("GPUHOOK_BUILD_CACHE") or Path.home() / ".cache/gpuhook-build")
    (cc,) = zig.glob("tools-zig-*/bin/python")
    wrapper = tmp_path / "cc"
    wrapper.write_text(f"#!/bin/sh\nexport ZIG_GLOBAL_CACHE_DIR={tmp_path}/zig ZIG_LOCAL_CACHE_DIR={tmp_path}/zig\n"
                       f"exec {cc} -m ziglang cc -target aarch64-linux-gnu.2.17 \"$@\"\n")
    wrapper.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config), "GPUHOOK_STUB_CC": str(wrapper),
           "GPUHOOK_STUB_CACHE": str(tmp_path / "stubs")}

    def gpuhook(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(build / "bin/gpuhook"), *args], env=env, capture_output=True, text=True,
                              timeout=300, check=False)

    assert gpuhook("--version").stdout.startswith("gpuhook ")
    made = gpuhook("simulate", "--root", str(host), "--nvidia", "2", "--amd", "1")
    assert made.returncode == 0, made.stderr
    assert "aarch64" in subprocess.run(["file", "-L", str(host / "usr/bin/nvidia-smi")], capture_output=True,
                                       text=True).stdout  # the stub tools are the host's architecture
    listed = gpuhook("list", "--json")
    assert listed.returncode == 0 and listed.stdout.count('"vendor": "nvidia"') == 2, listed.stderr
    cdi = gpuhook("cdi", "generate", "--output-dir", str(tmp_path / "cdi"))
    assert cdi.returncode == 0, cdi.stderr
    assert any("nvidia.com/gpu" in p.read_text() or "nvidia.com" in p.read_text() for p in (tmp_path / "cdi").iterdir())
    doctor = gpuhook("doctor")
    assert "built from this installation's sources" in doctor.stdout, doctor.stdout + doctor.stderr
    # the native front end passes a container without a GPU through, untouched, to the runtime (an arm64 script
    # here, standing in for runc: what runs it is what matters)
    (tmp_path / "runc").write_text(f"#!/bin/sh\necho \"runtime got: $*\" > {tmp_path}/got\n")
    (tmp_path / "runc").chmod(0o755)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text('{"ociVersion": "1.0.2", "process": {"args": ["true"]}}')
    for cid in ("c1", "c2"):  # the first through the Python shim, which writes what the second's front end reads
        ran = subprocess.run([str(build / "bin/gpuhook-runtime"), "create", "--bundle", str(bundle), cid], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
        assert ran.returncode == 0, ran.stderr
        assert (tmp_path / "got").read_text().strip() == f"runtime got: create --bundle {bundle} {cid}"
    assert (bundle / "config.json").read_text() == '{"ociVersion": "1.0.2", "process": {"args": ["true"]}}'


def test_install_sh_on_debian_11(export: Path, release: Path, tmp_path: Path,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """On Debian 11 (python3 3.9) install.sh from a checkout without a build refuses in one line naming what the
    host has and what to install instead; from a checkout with the build, it installs that and says so."""
    root = hosts.copy_root(hosts.debian_root("bullseye"), tmp_path / "root")
    assert hosts.glibc_of(root).startswith("2.31")
    bare = tmp_path / "checkout"  # the checkout without dist/
    shutil.copytree(export, bare, ignore=shutil.ignore_patterns("dist", "build"))
    host = hosts.Host(root, tmp_path_factory.getbasetemp(), tmp_path / "run")  # the export, at its own path
    try:
        _install_sh_on(host.runner(), root, bare, export, tmp_path)
    finally:
        host.stop()


def _install_sh_on(enter: list[str], root: Path, bare: Path, export: Path, tmp_path: Path) -> None:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GPUHOOK_PREFIX": "/opt/gpuhook",
           "GPUHOOK_BINDIR": "/usr/local/bin", "GPUHOOK_UNITDIR": str(tmp_path / "units")}
    refused = subprocess.run([*enter, "bash", str(bare / "install.sh")], env=env, capture_output=True, text=True,
                             timeout=300, check=False)
    said = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert refused.returncode == 1 and len(said) == 1, refused.stdout + refused.stderr
    assert "python3 is 3.9" in said[0] and "3.11 or newer" in said[0] and ".deb or .rpm" in said[0], said
    assert not (root / "opt/gpuhook").exists()
    done = subprocess.run([*enter, "bash", str(export / "install.sh")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installing the self-contained build" in done.stdout and "it needs no Python" in done.stdout
    version = subprocess.run([*enter, "/usr/local/bin/gpuhook", "version"], capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.stdout.startswith("gpuhook "), version.stderr
