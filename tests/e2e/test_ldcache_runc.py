"""The container's linker cache written by gpuhook, not by an ldconfig run per container, in real runc on Debian
roots of three glibc generations (debootstrap of bullseye 2.31, bookworm 2.36, trixie 2.41, cached by key in
tests/installed/hosts.py): the container's own loader finds the injected libraries, the image's own later ldconfig
keeps them, read-only roots, hostile image caches, and no ldconfig process at all on the way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuhook.simulator.stub_libs import build
from gpuhook.testing.bundle import oci_config
from gpuhook.testing.simulate import HostSpec, build_host

from ..installed.hosts import debian_root
from . import conftest

SUITES = ["bullseye", "bookworm", "trixie"]
NV = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}
AMD_HOST_ROCM = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd", "gpuhook.dev/host-rocm": "true"}
LIB = "/usr/lib/x86_64-linux-gnu"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1 NVIDIA GPU and 1 AMD GPU whose driver (amdgpu-dkms 6.8.5) supports the host's ROCm 6.2.1."""
    spec = HostSpec(nvidia=1, amd=1, amd_driver="6.8.5", host_rocm=("6.2.1",))
    return build_host(str(tmp_path_factory.mktemp("ldcache") / "host"), spec)


@pytest.fixture(scope="module", params=SUITES)
def suite(request: pytest.FixtureRequest) -> str:
    if shutil.which("debootstrap") is None and not os.environ.get("CI"):
        pytest.skip("debootstrap is not installed")
    return str(request.param)


def _probe(suite: str, library: str) -> str:
    """A shell command that dlopens `library` as a program of the image does: the host-built probe where the image's
    glibc is as new as the host's, the image's own Python (ctypes: dlopen) on bullseye, older than the host's."""
    if suite == "bullseye":
        return (f"python3 -c 'import ctypes; ctypes.CDLL(\"{library}\"); print(\"dlopen {library} ok\")' "
                f"|| echo 'dlopen {library} failed'")
    return f"/usr/local/bin/dlopen-probe {library}"


class Image:
    """A container root: an overlay of the cached debootstrap root (never written) with an upper layer of the test."""

    def __init__(self, lower: Path, work: Path) -> None:
        self.merged = work / "merged"
        for d in ("upper", "work", "merged"):
            (work / d).mkdir(parents=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={work / 'upper'},workdir={work / 'work'}", str(self.merged)],
                       check=True, timeout=30)
        probe = self.merged / "usr/local/bin/dlopen-probe"
        probe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build("probe.c", "dlopen-probe", libs=("-ldl",)), probe)
        self.mounts = [self.merged]

    def read_only(self) -> None:
        """The root's own file system refuses writes (a read-only mount of it): gpuhook cannot write there."""
        subprocess.run(["mount", "--bind", str(self.merged), str(self.merged)], check=True, timeout=30)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(self.merged)], check=True, timeout=30)
        self.mounts.append(self.merged)

    def close(self) -> None:
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(m)], check=False, timeout=30)


@pytest.fixture
def image(suite: str, tmp_path: Path) -> Iterator[Image]:
    made = Image(debian_root(suite), tmp_path / "image")
    yield made
    made.close()


def _run(host: str, image: Image, tmp: Path, script: str, annotations: Mapping[str, str],
         readonly: bool = False, trace: bool = False, mode: str = "shim",
         spec_edit: Callable[[dict[str, Any]], None] | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`gpuhook-runtime run` of a bundle whose root is the image (an absolute root.path), as root in the container
    (mode "hook": plain runc with gpuhook as its prestart hook); under `strace -f` (every execve) if `trace`. The
    process and the bundle."""
    cid = "gh-" + uuid.uuid4().hex[:12]
    bundle = tmp / cid
    bundle.mkdir()
    spec = oci_config(["sh", "-c", script], annotations=annotations)
    spec["root"] = {"path": str(image.merged), "readonly": readonly}
    spec["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"]
                                       for k in ("bounding", "effective", "permitted")}
    cfg = tmp / f"{cid}.toml"
    if mode == "hook":
        spec["hooks"] = {"prestart": [{"path": conftest.GPUHOOK, "args": ["gpuhook", "hook", "prestart"],
                                       "env": [f"GPUHOOK_CONFIG={cfg}"]}]}
    if spec_edit:
        spec_edit(spec)
    (bundle / "config.json").write_text(json.dumps(spec))
    cfg.write_text(f'host_root = "{host}"\nruntime = "runc"\nstate_dir = "{tmp / "state"}"\n'
                   f'log_file = "{tmp / "gpuhook.log"}"\n')
    argv = ["runc" if mode == "hook" else conftest.SHIM, "run", "--bundle", str(bundle), cid]
    if trace:
        argv = ["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(tmp / f"{cid}.trace"),
                *argv]
    done = subprocess.run(argv, env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(cfg)}, capture_output=True,
                          text=True, timeout=120, check=False)
    return done, bundle


def _hooks(bundle: Path) -> str:
    return json.dumps(json.loads((bundle / "config.json").read_text()).get("hooks") or {})


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_nvidia_libraries_are_found_with_no_ldconfig_run(host: str, image: Image, suite: str, tmp_path: Path,
                                                         mode: str) -> None:
    script = (f"{_probe(suite, 'libcuda.so.1')}; ldconfig -p | grep libcuda; "
              "ldconfig -p | grep -q 'libc.so.6 (libc6,x86-64' && echo image-entries-kept")
    done, bundle = _run(host, image, tmp_path, script, NV, trace=True, mode=mode)
    assert done.returncode == 0, done.stderr
    assert "is ignored" not in (tmp_path / "gpuhook.log").read_text()  # the image's own cache was used
    assert "dlopen libcuda.so.1 ok" in done.stdout and "image-entries-kept" in done.stdout
    assert f"libcuda.so.1 (libc6,x86-64) => {LIB}/libcuda.so." in done.stdout  # the image's own ldconfig reads it
    assert "--ldcache" not in _hooks(bundle) and "update-ldcache" not in _hooks(bundle)
    trace = (tmp_path / f"{bundle.name}.trace").read_text()
    execs = [line for line in trace.splitlines() if "execve(" in line and "ENOENT" not in line]
    ldconfigs = [line for line in execs if "ldconfig" in line.split("execve(", 1)[1].split(",", 1)[0]]
    assert execs and {line.split(", [", 1)[1].split("]", 1)[0] for line in ldconfigs} == {'"ldconfig", "-p"'}  # ours


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_host_rocm_is_found_in_a_slim_image(host: str, image: Image, suite: str, tmp_path: Path, mode: str) -> None:
    """/opt/rocm-<version>/lib is no directory the loader searches by default: only the cache finds it."""
    done, bundle = _run(host, image, tmp_path, _probe(suite, "libamdhip64.so.6"), AMD_HOST_ROCM, mode=mode)
    assert done.returncode == 0, done.stderr
    assert "dlopen libamdhip64.so.6 ok" in done.stdout
    assert "--ldcache" not in _hooks(bundle)


def test_the_images_own_later_ldconfig_keeps_the_injected_libraries(host: str, image: Image, suite: str,
                                                                    tmp_path: Path) -> None:
    """A package install in the container runs the image's ldconfig, which rebuilds the cache from its ld.so.conf:
    the driver's directory is the image's own; host ROCm's is listed by gpuhook's conf file."""
    script = (f"ldconfig 2>/dev/null; ldconfig -p | grep -c 'libamdhip64.so.6 '; {_probe(suite, 'libamdhip64.so.6')}; "
              "cat /etc/ld.so.conf.d/000-gpuhook.conf")
    done, _ = _run(host, image, tmp_path, script, AMD_HOST_ROCM)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "1" and "dlopen libamdhip64.so.6 ok" in lines[1]
    assert lines[2] == "/opt/rocm-6.2.1/lib"
    script = f"ldconfig 2>/dev/null; ldconfig -p | grep -c 'libcuda.so.1 '; {_probe(suite, 'libcuda.so.1')}"
    done, _ = _run(host, image, tmp_path, script, NV)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "1" and "dlopen libcuda.so.1 ok" in done.stdout


def test_a_read_only_root(host: str, image: Image, suite: str, tmp_path: Path) -> None:
    """root.readonly (the host side stays writable: written there), then a root whose own file system refuses
    writes (the cache kept under state_dir, bind-mounted read-only)."""
    script = f"{_probe(suite, 'libcuda.so.1')}; touch /x 2>/dev/null || echo rootfs-ro"
    done, bundle = _run(host, image, tmp_path, script, NV, readonly=True)
    assert done.returncode == 0, done.stderr
    assert "dlopen libcuda.so.1 ok" in done.stdout and "rootfs-ro" in done.stdout
    image.read_only()
    done, bundle = _run(host, image, tmp_path, script, NV, readonly=True)
    assert done.returncode == 0, done.stderr
    assert "dlopen libcuda.so.1 ok" in done.stdout
    spec = json.loads((bundle / "config.json").read_text())
    (bound,) = [m for m in spec["mounts"] if m["destination"] == "/etc/ld.so.cache"]
    assert bound["source"].startswith(str(tmp_path / "state")) and "ro" in bound["options"]
    assert "--ldcache" not in _hooks(bundle)


def _gc(host: str, state: Path) -> list[str]:
    config = state.parent / "gc.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{state}"\n')
    done = subprocess.run([conftest.GPUHOOK, "gc"], env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_gc_keeps_a_kept_cache_while_its_container_lives(host: str, image: Image, suite: str, tmp_path: Path) -> None:
    """A read-only root's cache kept under state_dir: gc leaves it while the container that mounts it runs (its
    record names it, however old the file), and removes it once the container is gone."""
    done, _ = _run(host, image, tmp_path, "true", NV, readonly=True)  # runc makes the mount points while it can
    assert done.returncode == 0, done.stderr
    image.read_only()
    state = tmp_path / "state"
    ran: list[subprocess.CompletedProcess[str]] = []
    runner = threading.Thread(target=lambda: ran.append(_run(host, image, tmp_path, "sleep 4; echo done", NV,
                                                             readonly=True)[0]))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and runner.is_alive():
            kept = list((state / "ldcache").glob("*.cache")) if (state / "ldcache").is_dir() else []
            records = [r.read_text() for r in (state / "containers").glob("*.json")] if kept else []
            if any(str(kept[0]) in r for r in records):  # the record of this container (the first one's is there)
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"no record named a kept cache while the container ran: {ran}")
        os.utime(kept[0], (0, 0))  # older than any moment between keeping and the record
        said = _gc(host, state)
        assert runner.is_alive(), f"the container ended before gc: {ran}"
        assert str(kept[0]) not in " ".join(said), said
        assert kept[0].is_file()
    finally:
        runner.join(60)
    assert ran and ran[0].returncode == 0 and "done" in ran[0].stdout, ran
    assert f"gc: removed {kept[0]}" in _gc(host, state)
    assert not kept[0].exists()


def _symlink_out(etc: Path, outside: Path) -> None:
    (etc / "ld.so.cache").symlink_to(outside)


def _fifo(etc: Path, _: Path) -> None:
    os.mkfifo(etc / "ld.so.cache")


def _huge(etc: Path, _: Path) -> None:
    with open(etc / "ld.so.cache", "wb") as f:
        f.truncate(17 * 1024 * 1024)


def _truncated(etc: Path, _: Path) -> None:
    data = (etc / "ld.so.cache").read_bytes()
    (etc / "ld.so.cache").write_bytes(data[:len(data) // 3])


def _directory(etc: Path, _: Path) -> None:
    (etc / "ld.so.cache").mkdir()


HOSTILE = {"symlink-out-of-the-root": _symlink_out, "fifo": _fifo, "huge": _huge, "truncated": _truncated,
           "directory": _directory}


@pytest.mark.parametrize("mode", ["shim", "hook"])
@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_image_cache_is_ignored_never_followed(host: str, image: Image, suite: str, tmp_path: Path,
                                                          make: Callable[[Path, Path], None], mode: str) -> None:
    """The image's cache is ignored with one log line and the host's ldconfig rebuilds it (the fallback hook):
    the container starts in bounded time with its libraries, or is refused with nothing left behind; what a link
    points at outside the root is never read or written."""
    outside = tmp_path / "outside"
    outside.write_bytes(b"not for the container\n")
    etc = image.merged / "etc"
    (etc / "ld.so.cache").unlink()
    if make is _truncated:
        shutil.copy(debian_root(suite) / "etc/ld.so.cache", etc / "ld.so.cache")
    make(etc, outside)
    start = time.monotonic()
    done, bundle = _run(host, image, tmp_path, _probe(suite, "libcuda.so.1"), NV, mode=mode)
    assert time.monotonic() - start < 60
    if mode == "shim":  # (hook mode's fallback is not logged)
        log = (tmp_path / "gpuhook.log").read_text()
        assert sum("is ignored" in line for line in log.splitlines()) == 1
    assert outside.read_bytes() == b"not for the container\n"
    if make is _directory and done.returncode != 0:  # ldconfig cannot rename over a directory: refused
        state = subprocess.run(["runc", "state", bundle.name], capture_output=True, check=False)
        assert state.returncode != 0  # nothing left
        return
    assert done.returncode == 0, done.stderr
    assert "dlopen libcuda.so.1 ok" in done.stdout
