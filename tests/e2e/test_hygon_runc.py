"""Hygon DCUs, the third vendor, through gpuhook's runtime in front of real runc on a simulated host: what the
container sees (its DCU's nodes alone, /dev/kfd and /dev/mkfd, the host's HAL read-only), the image's DTK against
the host driver's window, and the refusals. Tuning a DCU: test_tuning_runc.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec, build_host

from .conftest import Run


@pytest.fixture(scope="module")
def dcu_host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1 NVIDIA GPU and 2 Hygon K100_AI DCUs (driver 6.2.26: DTK 24.04-25.04), a BMC's card0."""
    return build_host(str(tmp_path_factory.mktemp("dcu") / "host"), HostSpec(nvidia=1, hygon=2))


SEE = ("ls /dev/dri; ls /dev | grep -E '^(kfd|mkfd|nvidia[0-9])$'; cat /sys/fs/cgroup/devices/devices.list; "
       "ls /opt/hyhal/bin; touch /opt/hyhal/x 2>&1 || true; grep Groups /proc/self/status")


@pytest.mark.parametrize(("annotations", "env"), [
    ({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "hygon"}, {}),
    ({"gpuhook.dev/gpus": "0xdc0000000001"}, {}),
    ({}, {"HYGON_VISIBLE_DEVICES": "1"}),
], ids=["annotation", "unique id", "env"])
def test_a_container_sees_its_dcu_alone(dcu_host: str, run_container: Run, annotations: dict[str, str],
                                        env: dict[str, str]) -> None:
    r = run_container(dcu_host, SEE, annotations, env)
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[:4] == ["card2", "renderD129", "kfd", "mkfd"]  # DCU 1's nodes only: no card0 (BMC), no DCU 0
    assert "c 226:129 rwm" in r.out and "c 226:2 rwm" in r.out and "c 511:0 rwm" in r.out and "c 510:0 rwm" in r.out
    assert "c 226:128 rwm" not in r.out and "nvidia0" not in r.out
    assert "hy-smi" in lines and "Read-only file system" in r.out  # the host's HAL, read-only
    groups = next(line for line in lines if line.startswith("Groups:")).split()[1:]
    assert {"109", "44"} <= set(groups)


def test_hip_visible_devices_is_the_images_own(dcu_host: str, run_container: Run) -> None:
    """HIP_VISIBLE_DEVICES is read by the HIP runtime inside the container: it asks the host for nothing."""
    r = run_container(dcu_host, "ls /dev/dri 2>&1; ls /dev", env={"HIP_VISIBLE_DEVICES": "0"})
    assert r.rc == 0, r.err
    assert "renderD" not in r.out and "kfd" not in r.out
    assert r.spec_after == r.spec_before


def _dtk(version: str, info: bool) -> object:
    def edit(rootfs: Path) -> None:
        tree = rootfs / f"opt/dtk-{version}"
        (tree / ".info").mkdir(parents=True)
        if info:
            (tree / ".info/version").write_text(f"{version}\n")
        os.symlink(f"dtk-{version}", rootfs / "opt/dtk")
    return edit


@pytest.mark.parametrize("info", [True, False], ids=["info file", "directory name"])
def test_an_image_dtk_outside_the_drivers_window(dcu_host: str, run_container: Run, info: bool) -> None:
    asked = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "hygon"}
    said = "the image ships DTK 22.10 but the host's Hygon DCU driver 6.2.26 runs DTK 24.04 to 25.04"
    warned = run_container(dcu_host, "ls /dev/dri", asked, image_edit=_dtk("22.10", info))
    assert warned.rc == 0, warned.err
    assert said in Path(warned.bundle.parent / "gpuhook.log").read_text()
    strict = (f'host_root = "{dcu_host}"\n[policy]\nrocm_compatibility = "strict"\n')
    refused = run_container(dcu_host, "true", asked, config=strict, image_edit=_dtk("22.10", info))
    (line,) = refused.err.strip().splitlines()
    assert refused.rc != 0 and said in line and "use an image with DTK 24.04-25.04" in line, line
    assert refused.spec_after == refused.spec_before
    fits = run_container(dcu_host, "ls /dev/dri", asked, config=strict, image_edit=_dtk("24.04.2", info))
    assert fits.rc == 0 and "renderD128" in fits.out, fits.err


def test_compute_mode_on_a_dcu_is_refused(dcu_host: str, run_container: Run) -> None:
    r = run_container(dcu_host, "true", {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "hygon",
                                         "gpuhook.dev/compute-mode": "exclusive-process"})
    (line,) = r.err.strip().splitlines()
    assert r.rc != 0 and "is an NVIDIA setting but GPU 0 is a Hygon DCU: use gpuhook.dev/perf-level" in line
    assert r.spec_after == r.spec_before
