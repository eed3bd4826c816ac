from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook import hostrocm, procfs, records
from gpuhook.errors import PlanError, PolicyError, RequestError
from gpuhook.inventory import Gpu
from gpuhook.request import HostRocm, parse_request
from gpuhook.root import Root

FakeHost = Callable[..., str]

PARSE = [("true", HostRocm()), ("false", None), ("6.2", HostRocm("6.2")), ("6.2.1,override", HostRocm("6.2.1", True)),
         ("TRUE,override", HostRocm(None, True))]


@pytest.mark.parametrize(("value", "expect"), PARSE, ids=[p[0] for p in PARSE])
def test_parse(value: str, expect: HostRocm | None) -> None:
    req = parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/host-rocm": value}, {})
    assert req.host_rocm == expect and req.host_rocm_asked


@pytest.mark.parametrize("value", ["yes", "6.x", "6.2,force", ",override", "1.2.3.4"])
def test_parse_errors(value: str) -> None:
    with pytest.raises(RequestError, match=r"gpuhook\.dev/host-rocm"):
        parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/host-rocm": value}, {})


def _trees(*versions: str, default: str = "") -> tuple[hostrocm.RocmTree, ...]:
    return tuple(hostrocm.RocmTree(v, f"/opt/rocm-{v}", (f"/opt/rocm-{v}/lib",), v == default) for v in versions)


CHOOSE = [
    ("newest the driver supports", _trees("5.7.1", "6.2.1", "6.4.0", "7.0.0"), HostRocm(), "6.8.5", "6.4.0"),
    ("named by prefix", _trees("6.1.2", "6.2.0", "6.2.4"), HostRocm("6.2"), "6.8.5", "6.2.4"),
    ("named exactly", _trees("6.2.0", "6.2.4"), HostRocm("6.2.0"), "6.8.5", "6.2.0"),
    ("in-kernel driver: /opt/rocm's", _trees("6.1.2", "6.2.4", default="6.1.2"), HostRocm(), None, "6.1.2"),
    ("unknown driver: newest", _trees("6.1.2", "6.2.4"), HostRocm(), "6.9.1", "6.2.4"),
]


@pytest.mark.parametrize(("trees", "asked", "driver", "version"), [c[1:] for c in CHOOSE], ids=[c[0] for c in CHOOSE])
def test_choose(trees: tuple[hostrocm.RocmTree, ...], asked: HostRocm, driver: str | None, version: str) -> None:
    assert hostrocm.choose(trees, asked, driver).version == version


@pytest.mark.parametrize(("trees", "asked", "needle"), [
    ((), HostRocm(), "no /opt/rocm-<version>"),
    (_trees("6.1.2"), HostRocm("6.3"), "host has ROCm 6.1.2"),
    (_trees("5.6.0"), HostRocm(), "supports ROCm 6.0 to 6.4"),
], ids=["none", "named absent", "none supported"])
def test_choose_errors(trees: tuple[hostrocm.RocmTree, ...], asked: HostRocm, needle: str) -> None:
    with pytest.raises(PlanError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        hostrocm.choose(trees, asked, "6.8.5")


def test_plan_prepends_path_and_mounts_read_only() -> None:
    (tree,) = _trees("6.2.1")
    edits = hostrocm.plan(tree, "/srv/host", {"PATH": "/usr/bin:/bin"})
    assert [(m.host_path, m.container_path) for m in edits.mounts] == [("/srv/host/opt/rocm-6.2.1", "/opt/rocm-6.2.1"),
                                                                       ("/srv/host/opt/rocm-6.2.1", "/opt/rocm")]
    assert all("ro" in m.options for m in edits.mounts)
    assert edits.env == ("ROCM_PATH=/opt/rocm-6.2.1", "PATH=/opt/rocm-6.2.1/bin:/usr/bin:/bin")


def test_image_conflict() -> None:
    (tree,) = _trees("6.2.1")
    hostrocm.check_image(None, tree, HostRocm())
    hostrocm.check_image("6.2.1", tree, HostRocm())
    hostrocm.check_image("6.1.0", tree, HostRocm(None, True))
    with pytest.raises(PolicyError, match=r"ships ROCm 6\.1\.0"):
        hostrocm.check_image("6.1.0", tree, HostRocm())


def test_discover_trees(fake_host: FakeHost) -> None:
    root = Root(fake_host(amd=1, host_rocm=("6.1.2", "6.2.1")))
    trees = hostrocm.discover_trees(root)
    assert [(t.version, t.default, t.lib_dirs) for t in trees] == [("6.1.2", False, ("/opt/rocm-6.1.2/lib",)),
                                                                   ("6.2.1", True, ("/opt/rocm-6.2.1/lib",))]


def test_nvidia_procfs_copy_is_shared_and_only_names_own_gpus(fake_host: FakeHost, tmp_path: Path) -> None:
    root = Root(fake_host(nvidia=2))
    gpu1 = Gpu("nvidia", 1, "GPU-1", "0000:11:00.0", "H100", ())
    first = procfs.nvidia_copy(root, [gpu1], str(tmp_path))
    assert procfs.nvidia_copy(root, [gpu1], str(tmp_path)) == first  # shared by content
    assert os.listdir(f"{first}/nvidia/gpus") == ["0000:11:00.0"]
    params = Path(f"{first}/nvidia/params").read_text()
    assert "ModifyDeviceFiles: 0" in params and "DeviceFileMode: 438" in params
    assert oct(os.stat(f"{first}/nvidia/params").st_mode & 0o777) == "0o444"


def test_records_of_gone_containers_are_dropped(tmp_path: Path) -> None:
    runtime = tmp_path / "runc"
    (runtime / "alive").mkdir(parents=True)
    (runtime / "alive/state.json").write_text("{}")
    records.save(str(tmp_path), records.ContainerRecord("alive", (("nvidia", "535"),), str(runtime)))
    records.save(str(tmp_path), records.ContainerRecord("gone", (("nvidia", "535"),), str(runtime)))
    me = os.getpid()
    records.save(str(tmp_path), records.ContainerRecord("hooked", (), "", me, records.start_time(me)))
    records.save(str(tmp_path), records.ContainerRecord("reused-pid", (), "", me, "1"))
    assert [r.id for r in records.live_records(str(tmp_path))] == ["alive", "hooked"]
    assert sorted(os.listdir(tmp_path / "containers")) == ["alive.json", "hooked.json"]


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen(["true"])
    for _ in range(100):  # exited but not reaped yet: a zombie
        if Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.01)
    assert records.start_time(child.pid) == ""
    child.wait()
    assert records.start_time(os.getpid()) != ""
