from __future__ import annotations

import os
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
    allow(42, RULES, proc=proc, cgroup_root=str(tmp_path))
    # a plain file keeps only the last write: each rule went in its own write, as devices.allow requires
    assert allow_file.read_text() == "c 226:128 rw"


def test_no_v1_devices_controller_and_no_cgroup2_mount(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match=r"no devices controller .*not cgroup2"):
        allow(42, RULES, proc=_proc(tmp_path, "0::/system.slice/ctr\n", None), cgroup_root=str(tmp_path))


def test_v2_replaces_the_filter_with_the_spec_runtime_and_gpuhook_rules(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhook.apply import cgroup_v2, cgroups, runtime_filter

    swapped: list[tuple[str, bytes]] = []
    monkeypatch.setattr(cgroups, "unified", lambda root: True)
    monkeypatch.setattr(cgroup_v2, "replace_filter", lambda d, program: swapped.append((d, program)))
    spec = {"linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}
    proc = _proc(tmp_path, "5:devices:/\n0::/runc/ctr\n", None)
    (tmp_path / "proc" / str(os.getppid())).mkdir()
    (tmp_path / "proc" / str(os.getppid()) / "comm").write_text("crun\n")
    allow(42, RULES, spec, proc=proc, cgroup_root="/cg")
    want = runtime_filter.compile_for(spec, "crun", RULES)  # crun's own semantics (device_filter_crun.py)
    assert swapped == [("/cg/runc/ctr", want)]  # the unified entry, not v1's root devices cgroup


@pytest.mark.parametrize(("comm", "runtime"), [("runc", "runc"), ("crun", "crun"), ("youki", "runc"), (None, "runc")])
def test_runtime_of_the_hook_is_its_parent(tmp_path: Path, comm: str | None, runtime: str) -> None:
    from gpuhook.apply.cgroups import runtime_of

    (tmp_path / str(os.getppid())).mkdir()
    if comm:
        (tmp_path / str(os.getppid()) / "comm").write_text(comm + "\n")
    assert runtime_of(str(tmp_path)) == runtime


def test_unified_is_told_by_the_filesystem(tmp_path: Path) -> None:
    from gpuhook.apply.cgroups import unified

    assert not unified(str(tmp_path)) and not unified(str(tmp_path / "absent"))


def test_no_devices_hierarchy_mounted(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="no cgroup v1 devices hierarchy"):
        allow(42, RULES, proc=_proc(tmp_path, "5:devices:/ctr\n", None), cgroup_root=str(tmp_path))


def test_nothing_to_allow_touches_nothing(tmp_path: Path) -> None:
    allow(42, [], str(tmp_path / "absent"))
