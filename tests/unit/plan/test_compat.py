"""Compatibility checks against simulated hosts: the facts gathered from the real stub libcuda and NVML (via
ctypes and pynvml) and from image trees, then the pure check."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.config import Config
from gpuhook.errors import PolicyError
from gpuhook.host.facts import Needs, gather
from gpuhook.host.root import Root
from gpuhook.plan.compat import Verdict, check, cuda_vendor, needs
from gpuhook.plan.select import select_all
from gpuhook.simulator.stub_libs import build
from gpuhook.vendors.discover import discover
from gpuhook.vendors.registry import stack
from tests.unit.parsing import parse_request

FakeHost = Callable[..., str]
OLD = {"nvidia": 2, "nvidia_driver": "535.54.03", "cuda_version": 12020}


def _check(host: str, env: dict[str, str], annotations: dict[str, str] | None = None, image: str | None = None,
           policy: str = "warn", gpus: str = "all") -> Verdict:
    ann = {"gpuhook.dev/gpus": gpus, **(annotations or {})}
    inventory = discover(Root(host))
    selected = select_all(parse_request(ann, env), inventory)
    cuda, nvml = needs(selected, env, ann)
    facts = gather(Needs(image=image is not None, cuda=cuda, nvml=nvml, cuda_vendor=cuda_vendor(selected)), Root(host),
                   inventory.vendors, image or "/nonexistent", Config(path="c"), ())
    return check(selected, env, ann, facts, policy)


def test_the_issue_example_word_for_word(fake_host: FakeHost) -> None:
    with pytest.raises(PolicyError) as info:
        _check(fake_host(**OLD), {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"})
    assert str(info.value) == ("image requires cuda>=12.4 but the host driver 535.54.03 supports CUDA 12.2: upgrade "
                               "the driver to >= 550.54.14, use an image for CUDA <= 12.2, or set "
                               "NVIDIA_DISABLE_REQUIRE=1")


def test_met_requirement_and_disable(fake_host: FakeHost) -> None:
    host = fake_host(**OLD)
    assert _check(host, {"NVIDIA_REQUIRE_CUDA": "cuda>=12.2", "CUDA_VERSION": "12.2.0"}) == Verdict()
    assert _check(host, {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4", "NVIDIA_DISABLE_REQUIRE": "1"}) == Verdict()


def test_cuda_version_from_nvml_when_libcuda_is_missing(fake_host: FakeHost) -> None:
    host = fake_host(**OLD)
    for name in os.listdir(host + "/usr/lib/x86_64-linux-gnu"):
        if name.startswith("libcuda"):
            os.unlink(f"{host}/usr/lib/x86_64-linux-gnu/{name}")
    with pytest.raises(PolicyError, match=r"supports CUDA 12\.2"):
        _check(host, {"CUDA_VERSION": "12.4.1"})


def test_arch_from_nvml_names_the_gpu(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=2, nvidia_arch="7.0")
    with pytest.raises(PolicyError) as info:
        _check(host, {"NVIDIA_REQUIRE_ARCH": "arch>=8.0"}, gpus="1")
    message = str(info.value)
    assert "arch>=8.0" in message and "GPU 1 (GPU-00000001-" in message and "arch 7.0" in message
    assert _check(host, {"NVIDIA_REQUIRE_ARCH": "arch>=7.0"}) == Verdict()


def test_brand_from_nvml(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=1, nvidia_brand=5)  # NVML_BRAND_GEFORCE
    with pytest.raises(PolicyError, match="has brand geforce"):
        _check(host, {"NVIDIA_REQUIRE_BRAND": "brand=tesla"})
    assert _check(host, {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=geforce,driver>=535"}) == Verdict()


def test_annotation_requirement_way_out(fake_host: FakeHost) -> None:
    with pytest.raises(PolicyError, match=r"change gpuhook\.dev/require"):
        _check(fake_host(**OLD), {}, {"gpuhook.dev/require": "driver>=550"})


def _image_with_compat(tmp_path: Path, driver: str, cuda: int) -> str:
    image = tmp_path / "image"
    compat = image / "usr/local/cuda-12.x/compat"
    compat.mkdir(parents=True)
    os.symlink("/usr/local/cuda-12.x", image / "usr/local/cuda")  # as CUDA images have it
    lib = build("cuda.c", f"libcuda.so.{driver}", soname="libcuda.so.1",
                defines={"STUB_CUDA_VERSION": str(cuda)})
    shutil.copy2(lib, compat / f"libcuda.so.{driver}")
    os.symlink(f"libcuda.so.{driver}", compat / "libcuda.so.1")
    return str(image)


def test_forward_compat_lets_the_container_start_preferring_the_image_compat_dir(fake_host: FakeHost,
                                                                                tmp_path: Path) -> None:
    verdict = _check(fake_host(**OLD), {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"},
                     image=_image_with_compat(tmp_path, "550.54.15", 12040))
    assert verdict.edits.ldcache_dirs == ("/usr/local/cuda-12.x/compat",)
    assert "forward-compatibility" in verdict.warnings[0]


def test_forward_compat_too_old_for_the_requirement(fake_host: FakeHost, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"cuda>=12\.8"):
        _check(fake_host(**OLD), {"NVIDIA_REQUIRE_CUDA": "cuda>=12.8"},
               image=_image_with_compat(tmp_path, "550.54.15", 12040))


def test_compat_not_newer_than_host_driver_is_ignored(fake_host: FakeHost, tmp_path: Path) -> None:
    with pytest.raises(PolicyError):
        _check(fake_host(**OLD), {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"},
               image=_image_with_compat(tmp_path, "535.104.05", 12020))


def _rocm_image(tmp_path: Path, version: str) -> str:
    info = tmp_path / "image/opt/rocm/.info"
    info.mkdir(parents=True)
    (info / "version").write_text(version + "-66\n")
    return str(tmp_path / "image")


ROCM = [
    ("inside the window", "6.8.5", "6.1.2", "warn", None),
    ("outside, warn", "6.8.5", "5.4.3", "warn", "supports ROCm user space 6.0 to 6.4"),
    ("in-kernel driver", None, "6.1.2", "warn", "in-kernel amdgpu"),
    ("unknown dkms", "6.9.1", "6.1.2", "warn", "not in gpuhook's table"),
]


@pytest.mark.parametrize(("driver", "image", "policy", "warning"), [r[1:] for r in ROCM], ids=[r[0] for r in ROCM])
def test_rocm_windows(fake_host: FakeHost, tmp_path: Path, driver: str | None, image: str, policy: str,
                      warning: str | None) -> None:
    verdict = _check(fake_host(amd=1, amd_driver=driver), {}, image=_rocm_image(tmp_path, image), policy=policy)
    assert [w for w in verdict.warnings if warning and warning in w] or (warning is None and not verdict.warnings)


def test_rocm_strict_refuses(fake_host: FakeHost, tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        _check(fake_host(amd=1, amd_driver="6.8.5"), {}, image=_rocm_image(tmp_path, "5.4.3"), policy="strict")
    assert "ROCm 5.4.3" in str(info.value) and "6.8.5 (ROCm 6.2)" in str(info.value) and "strict" in str(info.value)


def test_rocm_requirement_in_annotation(fake_host: FakeHost) -> None:
    with pytest.raises(PolicyError, match=r"ROCm 6\.1"):
        _check(fake_host(amd=1, amd_driver="6.7.0"), {}, {"gpuhook.dev/require": "rocm>=6.2"})


def test_driver_tables() -> None:
    min_driver, cuda_of_driver = stack("nvidia").min_driver, stack("nvidia").release_of_driver
    assert (min_driver("12.4"), min_driver("12.7"), min_driver("99.0")) == ("550.54.14", "570.26", None)
    assert (cuda_of_driver("550.54.15"), cuda_of_driver("535.54.03"), cuda_of_driver("400.1")) == ("12.4", "12.2", None)
