from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.apply.cgroups import CgroupError, allow
from gpuhook.edits import DeviceRule

RULES = [DeviceRule("c", 195, 0), DeviceRule("c", 226, 128, "rw")]


def _proc(tmp_path: Path, cgroup: str, devices_mount: str | None) -> str:
    (tmp_path / "proc/42").mkdir(parents=True)
    (tmp_path / "proc/self").mkdir()
    (tmp_path / "proc/42/cgroup").write_text(cgroup)
    line = "30 25 0:26 / {mp} rw - cgroup cgroup rw,{opts}\n"
    mounts = line.format(mp="/sys/fs/cgroup/memory", opts="memory")
    if devices_mount:
        mounts += line.format(mp=devices_mount, opts="devices")
    (tmp_path / "proc/self/mountinfo").write_text(mounts)
    return str(tmp_path / "proc")


def test_v1_rules_written_one_per_write(tmp_path: Path) -> None:
    devices = tmp_path / "devices"
    (devices / "ctr").mkdir(parents=True)
    allow_file = devices / "ctr/devices.allow"
    allow_file.touch()
    proc = _proc(tmp_path, "5:devices:/ctr\n4:memory:/ctr\n0::/\n", str(devices))
    allow(42, RULES, proc)
    # a plain file keeps only the last write: each rule went in its own write, as devices.allow requires
    assert allow_file.read_text() == "c 226:128 rw"


def test_v2_only_fails_with_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match=r"cgroup v2.*gpuhook-runtime"):
        allow(42, RULES, _proc(tmp_path, "0::/system.slice/ctr\n", None))


def test_no_devices_hierarchy_mounted(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="no cgroup v1 devices hierarchy"):
        allow(42, RULES, _proc(tmp_path, "5:devices:/ctr\n", None))


def test_nothing_to_allow_touches_nothing(tmp_path: Path) -> None:
    allow(42, [], str(tmp_path / "absent"))
