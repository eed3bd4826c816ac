"""Compatibility checks in front of real runc: images that must not start, and ones that must."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpuhook.simulator.stub_libs import build
from gpuhook.testing.simulate import HostSpec, build_host

from .conftest import Result, Run


@pytest.fixture(scope="module")
def old_driver_host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """NVIDIA driver 535 (CUDA 12.2) and amdgpu-dkms 6.8.5 (ROCm 6.2)."""
    spec = HostSpec(nvidia=1, amd=1, nvidia_driver="535.54.03", cuda_version=12020, amd_driver="6.8.5")
    return build_host(str(tmp_path_factory.mktemp("old") / "host"), spec)


NV = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}
AMD = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"}


def _refused(r: Result, *needles: str) -> None:
    assert r.rc != 0
    (line,) = r.err.strip().splitlines()
    assert line.startswith("gpuhook-runtime: ")
    for n in needles:
        assert n in line
    assert not (r.bundle / "rootfs/ran").exists()
    assert r.spec_after == r.spec_before


def test_image_for_newer_cuda_is_refused(old_driver_host: str, run_container: Run) -> None:
    r = run_container(old_driver_host, "echo yes > /ran", NV, env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"})
    _refused(r, "image requires cuda>=12.4 but the host driver 535.54.03 supports CUDA 12.2",
             "upgrade the driver to >= 550.54.14", "NVIDIA_DISABLE_REQUIRE=1")


def test_image_within_the_driver_starts(old_driver_host: str, run_container: Run) -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0 brand=tesla,driver>=470,driver<471", "CUDA_VERSION": "12.0.1"}
    r = run_container(old_driver_host, "dlopen-probe libcuda.so.1", NV, env=env)
    assert r.rc == 0, r.err
    assert "cuDriverGetVersion=12020" in r.out


def test_disable_require_starts(old_driver_host: str, run_container: Run) -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4", "NVIDIA_DISABLE_REQUIRE": "1"}
    r = run_container(old_driver_host, "true", NV, env=env)
    assert r.rc == 0, r.err


def _compat_image(rootfs: Path) -> None:
    compat = rootfs / "usr/local/cuda-12.4/compat"
    compat.mkdir(parents=True)
    os.symlink("cuda-12.4", rootfs / "usr/local/cuda")
    lib = build("cuda.c", "libcuda.so.550.54.15", soname="libcuda.so.1", defines={"STUB_CUDA_VERSION": "12040"})
    shutil.copy2(lib, compat / "libcuda.so.550.54.15")


def test_forward_compat_image_starts_and_loads_the_compat_libcuda(old_driver_host: str, run_container: Run) -> None:
    r = run_container(old_driver_host, "dlopen-probe libcuda.so.1; grep ' /usr/lib/x86_64-linux-gnu/libcuda' "
                      "/proc/self/mountinfo", NV, env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, image_edit=_compat_image)
    assert r.rc == 0, r.err
    assert "dlopen libcuda.so.1 ok cuDriverGetVersion=12040" in r.out  # the image's compat library won
    assert " ro," in r.out  # and the host's libcuda is still there, read-only, where it was
    assert "forward-compatibility" in r.err
    assert not os.path.exists(f"{old_driver_host}/usr/local/cuda-12.4")  # nothing from the image went to the host


def _rocm_image(version: str):  # type: ignore[no-untyped-def]
    def edit(rootfs: Path) -> None:
        (rootfs / "opt/rocm-5.4.3/.info").mkdir(parents=True)
        (rootfs / "opt/rocm-5.4.3/.info/version").write_text(version + "-121\n")
        os.symlink("/opt/rocm-5.4.3", rootfs / "opt/rocm")

    return edit


def test_rocm_outside_the_window_warns_by_default(old_driver_host: str, run_container: Run) -> None:
    r = run_container(old_driver_host, "ls /dev/dri", AMD, image_edit=_rocm_image("5.4.3"))
    assert r.rc == 0, r.err
    assert "renderD128" in r.out
    assert "warning: the image ships ROCm 5.4.3 but the host amdgpu driver 6.8.5 (ROCm 6.2)" in r.err


def test_rocm_outside_the_window_refused_when_strict(old_driver_host: str, run_container: Run, tmp_path: Path) -> None:
    config = f'host_root = "{old_driver_host}"\n[policy]\nrocm_compatibility = "strict"\n'
    r = run_container(old_driver_host, "echo yes > /ran", AMD, config=config, image_edit=_rocm_image("5.4.3"))
    _refused(r, "ROCm 5.4.3", "supports ROCm user space 6.0 to 6.4", "strict")


def test_rocm_inside_the_window_starts_quietly(old_driver_host: str, run_container: Run) -> None:
    config = f'host_root = "{old_driver_host}"\n[policy]\nrocm_compatibility = "strict"\n'
    r = run_container(old_driver_host, "true", AMD, config=config, image_edit=_rocm_image("6.1.2"))
    assert r.rc == 0 and r.err == "", r.err
