"""host/health.py's faults (each class, value and effect), host/kernel_log.py read as it grows, host/ras.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.host.health import NO_EXECUTE, NO_SCHEDULE, NONE, Fault, faults, unhealthy
from gpuhook.host.inventory import Gpu
from gpuhook.host.kernel_log import KernelLog, xid
from gpuhook.host.ras import uncorrectable
from gpuhook.host.root import Root

GPU = Gpu(vendor="nvidia", index=0, uuid="GPU-0", pci="0000:3b:00.0", model="H100", nodes=())


@pytest.mark.parametrize(("gpu", "xids", "ras", "expected"), [
    (GPU, (), {}, ()),
    (Gpu(vendor="nvidia", index=0, uuid="GPU-0", pci="", model="", nodes=(), missing=("/dev/nvidia0",)), (), {},
     (Fault("gpu-lost", "node-missing", NO_EXECUTE, "device node /dev/nvidia0 is missing"),)),
    (GPU, (79,), {}, (Fault("xid", "79", NO_EXECUTE, "the driver logged XID 79"),)),
    (GPU, (92,), {}, (Fault("xid", "92", NO_SCHEDULE, "the driver logged XID 92"),)),
    (GPU, (31,), {}, (Fault("xid", "31", NONE, "the driver logged XID 31"),)),
    (GPU, (31, 92, 13), {}, (Fault("xid", "92", NO_SCHEDULE, "the driver logged XID 92"),)),
    (GPU, (48, 92), {}, (Fault("xid", "48", NO_EXECUTE, "the driver logged XID 48"),)),
    (GPU, (), {"umc": 0, "gfx": 0}, ()),
    (GPU, (), {"umc": 2, "gfx": 0, "sdma": 1},
     (Fault("ras", "sdma", NO_EXECUTE, "uncorrectable RAS errors: sdma 1, umc 2"),)),
], ids=["healthy", "node-missing", "xid-fatal", "xid-reset-needed", "xid-application", "worst-of-three",
        "fatal-beats-schedule", "ras-clear", "ras-uncorrectable"])
def test_faults_by_class_with_their_effects(gpu: Gpu, xids: tuple[int, ...], ras: dict[str, int],
                                            expected: tuple[Fault, ...]) -> None:
    assert faults(gpu, xids, ras) == expected


def test_an_application_xid_leaves_the_gpu_healthy_for_the_kubelet() -> None:
    assert unhealthy(faults(GPU, (31,))) == ""
    assert unhealthy(faults(GPU, (31, 79))) == "the driver logged XID 79"


@pytest.mark.parametrize(("message", "expected"), [
    ("NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, GPU has fallen off the bus.", ("0000:3b:00", 79)),
    ("NVRM: Xid (PCI:0000:01:00): 31, pid=79749, name=exe, Ch 0000000a, intr 00000000. MMU Fault",
     ("0000:01:00", 31)),
    ("NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.", None),
    ("amdgpu 0000:80:00.0: amdgpu: uncorrectable error", None),
], ids=["fallen-off-the-bus", "page-fault", "other-nvrm-line", "not-nvidia"])
def test_xids_in_kernel_log_messages(message: str, expected: tuple[str, int] | None) -> None:
    assert xid(message) == expected


def test_the_kernel_log_is_read_from_its_end_then_as_it_grows_and_anew_when_replaced(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    kmsg = tmp_path / "dev/kmsg"
    kmsg.write_text("6,1,10,-;NVRM: Xid (PCI:0000:3b:00): 48, before we started\n")
    log = KernelLog(Root(str(tmp_path)))
    assert log.read() == [] and log.error == ""
    with open(kmsg, "a") as f:
        f.write("4,2,20,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n4,3,")
    assert log.read() == ["NVRM: Xid (PCI:0000:3b:00): 79, pid=1"]
    with open(kmsg, "a") as f:
        f.write("30,-;second half\n")
    assert log.read() == ["second half"]
    assert log.read() == []
    replaced = tmp_path / "dev/kmsg.new"
    replaced.write_text("6,1,5,-;a new log\n")
    os.replace(replaced, kmsg)
    assert log.read() == ["a new log"]


def test_a_kernel_log_that_is_not_there_says_so_and_is_read_whole_once_it_appears(tmp_path: Path) -> None:
    log = KernelLog(Root(str(tmp_path)))
    assert log.read() == [] and "/dev/kmsg" in log.error
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kmsg").write_text("4,1,1,-;NVRM: Xid (PCI:0000:10:00): 79, pid=1\n")
    assert log.read() == ["NVRM: Xid (PCI:0000:10:00): 79, pid=1"] and log.error == ""


def test_ras_counters_uncorrectable_by_block(tmp_path: Path) -> None:
    ras = tmp_path / "sys/devices/pci0000:00/0000:80:00.0/ras"
    ras.mkdir(parents=True)
    (ras / "umc_err_count").write_text("ue: 3\nce: 17\n")
    (ras / "gfx_err_count").write_text("ue: 0\nce: 2\n")
    (ras / "features").write_text("feature mask: 0x3fff\n")
    gpu = Gpu(vendor="amd", index=0, uuid="", pci="0000:80:00.0", model="", nodes=(),
              sysfs="/sys/devices/pci0000:00/0000:80:00.0")
    assert uncorrectable(Root(str(tmp_path)), gpu) == {"umc": 3, "gfx": 0}
    assert uncorrectable(Root(str(tmp_path)), GPU) == {}
