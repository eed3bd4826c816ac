"""Hostile images through real runc, in both modes: the linker-cache refresh cannot write outside the image's
own filesystem, image files that are not small regular files never hang or exhaust gpuhook, and every hook
gpuhook adds has a deadline. Each run is bounded; what is checked is on the host side."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from gpuhook.simulator.stub_libs import build

from . import conftest
from .conftest import Run

MODES = ["shim", "hook"]
NV = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}
AMD = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"}
LIB = "usr/lib/x86_64-linux-gnu"


def _volume(tmp_path: Path) -> Path:
    """A host directory the container user (1000) cannot write, with a library of the host's in it."""
    vol = tmp_path / "volume"
    vol.mkdir()
    vol.chmod(0o755)
    lib = build("generic.c", "libhostonly.so.1.0", soname="libhostonly.so.1", defines={"STUB_NAME": '"host"'})
    (vol / "libhostonly.so.1.0").write_bytes(Path(lib).read_bytes())
    return vol


def _mount_volume(vol: Path) -> object:
    def edit(spec: dict[str, object]) -> None:
        spec["mounts"].append({"destination": "/vol", "type": "bind", "source": str(vol),  # type: ignore[attr-defined]
                               "options": ["rbind", "rw"]})
    return edit


def _evil_sonames(rootfs: Path) -> None:
    """Libraries whose SONAMEs climb out of their directory, and an ld.so.conf entry naming the volume."""
    for name, soname in (("libclimb.so.1.0", "../../../vol/pwned.so.1"), ("libabs.so.1.0", "../../../../../vol/x.so")):
        lib = build("generic.c", name, soname=soname, defines={"STUB_NAME": '"evil"'})
        (rootfs / LIB / name).write_bytes(Path(lib).read_bytes())
    (rootfs / "etc/ld.so.conf.d/vol.conf").write_text("/vol\n")


@pytest.mark.parametrize("mode", MODES)
def test_the_linker_cache_refresh_writes_nothing_into_a_volume(mixed_host: str, run_container: Run, tmp_path: Path,
                                                               mode: str) -> None:
    vol = _volume(tmp_path)
    before = sorted(os.listdir(vol))
    r = run_container(mixed_host, "dlopen-probe libcuda.so.1; ls /vol", NV, mode=mode,
                      spec_edit=_mount_volume(vol), image_edit=_evil_sonames)
    assert r.rc == 0, r.err
    assert "dlopen libcuda.so.1 ok" in r.out  # the container still sees its driver libraries in the cache
    assert sorted(os.listdir(vol)) == before  # no SONAME link, no cache, nothing made in the volume
    assert not (tmp_path / "pwned.so.1").exists()


FILES = {
    "fifo": lambda p: os.mkfifo(p),
    "zero-device": lambda p: os.mknod(p, stat.S_IFCHR | 0o644, os.makedev(1, 5)),  # /dev/zero: endless
    "huge-sparse": lambda p: open(p, "wb").truncate(8 << 30),  # noqa: SIM115
    "socket-like-dir": lambda p: os.mkdir(p),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", list(FILES))
def test_an_image_version_file_that_is_not_a_small_file_never_hangs(mixed_host: str, run_container: Run,
                                                                     kind: str, mode: str) -> None:
    def image(rootfs: Path) -> None:
        info = rootfs / "opt/rocm/.info"
        info.mkdir(parents=True)
        FILES[kind](str(info / "version"))

    start = time.monotonic()
    r = run_container(mixed_host, "ls /dev/kfd", AMD, mode=mode, image_edit=image)
    assert time.monotonic() - start < 20
    assert r.rc == 0, r.err
    assert "/dev/kfd" in r.out  # the container starts; the image's ROCm is unknown, not guessed


def _stuck(tmp_path: Path) -> tuple[Path, str]:
    """An ldconfig that never ends, and its command line (unique to this test, so that pgrep finds only it)."""
    import random

    sleeper = f"sleep 120.{random.randrange(10**6):06d}"
    script = tmp_path / "stuck-ldconfig"
    script.write_text(f"#!/bin/sh\nexec {sleeper}\n")
    script.chmod(0o755)
    return script, sleeper


@pytest.mark.parametrize("mode", MODES)
def test_a_stuck_helper_is_killed_and_the_container_refused(mixed_host: str, run_container: Run, tmp_path: Path,
                                                             mode: str) -> None:
    stuck, sleeper = _stuck(tmp_path)
    config = (f'host_root = "{mixed_host}"\nruntime = "runc"\nldconfig = "{stuck}"\n'
              f'hook_timeout = 2\nstate_dir = "{tmp_path / "state"}"\n')

    def fifo_cache(rootfs: Path) -> None:  # an image cache gpuhook will not read: ldconfig rebuilds it instead
        os.mkfifo(rootfs / "etc/ld.so.cache")

    start = time.monotonic()
    r = run_container(mixed_host, "true", NV, mode=mode, config=config, image_edit=fifo_cache)
    assert time.monotonic() - start < 30
    assert r.rc != 0
    state = subprocess.run(["runc", "state", r.cid], capture_output=True, text=True, check=False)
    assert state.returncode != 0  # nothing half-created is left behind
    leftover = subprocess.run(["pgrep", "-f", sleeper], capture_output=True, text=True, check=False)
    assert leftover.stdout.strip() == ""


def test_every_hook_the_shim_adds_has_a_deadline(mixed_host: str, run_container: Run, tmp_path: Path) -> None:
    config = (f'host_root = "{mixed_host}"\nruntime = "/bin/true"\nhook_timeout = 7\n'
              f'state_dir = "{tmp_path / "state"}"\n')
    r = run_container(mixed_host, "true", {**NV, "gpuhook.dev/clocks": "1500"}, config=config)
    import json

    spec = json.loads(r.spec_after)
    hooks = [h for stage in spec["hooks"].values() for h in stage]
    assert all(h.get("timeout") == 7 for h in hooks), hooks
    # one native createContainer process (procfs copies + linker cache), the tuning prestart and poststop
    assert [h["args"][0] for h in spec["hooks"]["createContainer"]] == ["gpuhook-createhook"]
    assert len(spec["hooks"]["prestart"]) == len(spec["hooks"]["poststop"]) == 1


@pytest.mark.parametrize("mode", MODES)
def test_an_ld_so_conf_that_is_a_fifo_cannot_hang_the_start(mixed_host: str, run_container: Run, tmp_path: Path,
                                                            mode: str) -> None:
    def image(rootfs: Path) -> None:
        (rootfs / "etc/ld.so.conf").unlink()
        os.mkfifo(rootfs / "etc/ld.so.conf")

    config = (f'host_root = "{mixed_host}"\nruntime = "runc"\nhook_timeout = 3\n'
              f'state_dir = "{tmp_path / "state"}"\n')
    start = time.monotonic()
    r = run_container(mixed_host, "true", NV, mode=mode, config=config, image_edit=image)
    assert time.monotonic() - start < 30  # the refresh's deadline bounds it, whatever ldconfig does with a FIFO
    if r.rc != 0:
        assert subprocess.run(["runc", "state", r.cid], capture_output=True, check=False).returncode != 0


@pytest.mark.parametrize("named", [True, False], ids=["mounts-named", "older-spec"])
def test_cdis_linker_cache_hook_writes_nothing_into_a_volume(mixed_host: str, run_container: Run,
                                                            tmp_path: Path, named: bool) -> None:
    """The spec a CDI consumer makes from gpuhook's CDI spec (driver files mounted, `gpuhook hook update-ldcache`
    as the createContainer hook, naming its mounts, or as an older gpuhook wrote it), run by plain runc against the
    same hostile image."""
    vol = _volume(tmp_path)
    before = sorted(os.listdir(vol))
    libs = Path(mixed_host, LIB).iterdir()
    libcuda = next(p for p in libs if p.name.startswith("libcuda.so.") and not p.is_symlink())
    cfg = tmp_path / "cdi.toml"

    def cdi(spec: dict[str, object]) -> None:
        _mount_volume(vol)(spec)  # type: ignore[operator]
        spec["mounts"].append({"destination": f"/{LIB}/{libcuda.name}", "type": "bind",  # type: ignore[attr-defined]
                               "source": str(libcuda), "options": ["ro", "nosuid", "nodev", "bind"]})
        spec["hooks"] = {"createContainer": [{"path": conftest.GPUHOOK, "args": [
            "gpuhook", "hook", "update-ldcache", "--folder", f"/{LIB}",
            *(["--mount", str(libcuda), f"/{LIB}/{libcuda.name}"] if named else [])], "env": [f"GPUHOOK_CONFIG={cfg}"],
            "timeout": 30}]}

    cfg.write_text(f'host_root = "{mixed_host}"\nstate_dir = "{tmp_path / "state"}"\n')
    r = run_container(mixed_host, "dlopen-probe libcuda.so.1", mode="hook", spec_edit=cdi, image_edit=_evil_sonames,
                      config=cfg.read_text())
    assert r.rc == 0, r.err
    assert "dlopen libcuda.so.1 ok" in r.out  # the CDI-mounted library is in the container's cache
    assert sorted(os.listdir(vol)) == before


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_an_images_env_does_not_widen_the_users_gpus_flag(mixed_host: str, run_container: Run, tmp_path: Path,
                                                          mode: str) -> None:
    """`docker run --gpus device=1` (Docker's hook and NVIDIA_VISIBLE_DEVICES=1) of an image whose env says
    AMD_VISIBLE_DEVICES=all, on a host with both: GPU 1 and nothing of AMD's, whichever mode serves it."""
    cfg = tmp_path / f"{mode}.toml"
    cfg.write_text(f'host_root = "{mixed_host}"\nstate_dir = "{tmp_path}/state"\n')
    docker_hook = {"path": str(Path(conftest.GPUHOOK).parent / "nvidia-container-runtime-hook"),
                   "args": ["nvidia-container-runtime-hook", "prestart"], "env": [f"GPUHOOK_CONFIG={cfg}"]}

    def flag(spec: dict[str, object]) -> None:
        spec["hooks"] = {"prestart": [docker_hook]}

    r = run_container(mixed_host, "ls /dev; ls /dev/dri 2>&1; true", env={"AMD_VISIBLE_DEVICES": "all",
                                                                     "NVIDIA_VISIBLE_DEVICES": "1"},
                      config=cfg.read_text(), spec_edit=flag, mode=mode)
    assert r.rc == 0, r.err
    seen = r.out.split()
    assert "nvidia1" in seen and "nvidia0" not in seen
    assert "kfd" not in seen and not [n for n in seen if n.startswith(("renderD", "card"))]
