from __future__ import annotations

import os
import shutil
from collections.abc import Callable

import pytest

from gpuhook.host.inventory import DriverFile
from gpuhook.host.root import Root
from gpuhook.vendors.amd import kfd
from gpuhook.vendors.discover import discover
from gpuhook.vendors.nvidia import files
from gpuhook.vendors.nvidia import vendor as nvidia

FakeHost = Callable[..., str]



@pytest.mark.parametrize("n", [0, 1, 8], ids=["0 gpus", "1 gpu", "8 gpus"])
def test_nvidia_hosts(fake_host: FakeHost, n: int) -> None:
    inv = discover(Root(fake_host(nvidia=n, nvidia_driver="535.54.03", drivers_without_gpus=("nvidia",))))
    nv = inv.vendor("nvidia")
    assert nv is not None and inv.vendor("amd") is None
    assert nv.driver_version == "535.54.03"
    assert [g.index for g in nv.gpus] == list(range(n))
    assert [g.pci for g in nv.gpus] == sorted(g.pci for g in nv.gpus)
    for g in nv.gpus:
        assert g.uuid.startswith("GPU-") and g.model == "NVIDIA H100 80GB HBM3"
        (node,) = g.nodes
        assert (node.path, node.kind, node.major, node.minor, node.mode) == (f"/dev/nvidia{g.index}", "c", 195,
                                                                             g.index, 0o666)
    assert {n.path for n in nv.shared_nodes} == {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                                 "/dev/nvidia-modeset"}
    libs = {(f.capability, os.path.basename(f.source)) for f in nv.files if f.kind == "lib"}
    assert ("compute", "libcuda.so.535.54.03") in libs and ("utility", "libnvidia-ml.so.535.54.03") in libs
    assert ("graphics", "libEGL_nvidia.so.535.54.03") in libs
    smi = next(f for f in nv.files if f.target == "/usr/bin/nvidia-smi")
    assert smi.capability == "utility" and smi.kind == "bin"


@pytest.mark.parametrize("n", [0, 1, 8], ids=["0 gpus", "1 gpu", "8 gpus"])
def test_amd_hosts(fake_host: FakeHost, n: int) -> None:
    inv = discover(Root(fake_host(amd=n, drivers_without_gpus=("amd",))))
    a = inv.vendor("amd")
    assert a is not None and inv.vendor("nvidia") is None
    assert a.driver_version == "6.7.0"
    assert [n.path for n in a.shared_nodes] == ["/dev/kfd"]
    for g in a.gpus:
        assert g.arch == "gfx942" and g.uuid == hex(0x5A1E000000000000 + g.index)
        assert g.pci == f"0000:{0x80 + g.index:02x}:00.0"
        # card0 is the BMC's: GPU i has card i+1, found through sysfs, not by counting
        assert [(n.path, n.gid) for n in g.nodes] == [(f"/dev/dri/renderD{128 + g.index}", 109),
                                                     (f"/dev/dri/card{g.index + 1}", 44)]
    assert len(a.gpus) == n


def test_in_tree_amd_driver_has_no_version(fake_host: FakeHost) -> None:
    a = discover(Root(fake_host(amd=1, amd_driver=None))).vendor("amd")
    assert a is not None and a.driver_version is None and len(a.gpus) == 1


def test_mixed_host(fake_host: FakeHost) -> None:
    inv = discover(Root(fake_host(nvidia=2, amd=3)))
    assert [(v.vendor, len(v.gpus)) for v in inv.vendors] == [("nvidia", 2), ("amd", 3)]


def test_no_driver(fake_host: FakeHost) -> None:
    assert discover(Root(fake_host())).vendors == ()


def test_missing_gpu_node_is_recorded(fake_host: FakeHost) -> None:
    root = fake_host(nvidia=2, amd=1)
    os.unlink(root + "/dev/nvidia1")
    os.unlink(root + "/dev/dri/renderD128")
    inv = discover(Root(root))
    assert inv.vendor("nvidia").gpus[1].missing == ("/dev/nvidia1",)  # type: ignore[union-attr]
    assert inv.vendor("amd").gpus[0].missing == ("/dev/dri/renderD128",)  # type: ignore[union-attr]


def test_libraries_without_ld_cache_found_in_standard_dirs(fake_host: FakeHost) -> None:
    root = fake_host(nvidia=1)
    os.unlink(root + "/etc/ld.so.cache")
    nv = nvidia.discover(Root(root))
    assert nv is not None
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15" in {f.source for f in nv.files}


def test_only_the_loaded_driver_version_when_old_libraries_linger(fake_host: FakeHost) -> None:
    root = fake_host(nvidia=1, nvidia_driver="550.54.15")
    lib = root + "/usr/lib/x86_64-linux-gnu"
    shutil.copy2(lib + "/libcuda.so.550.54.15", lib + "/libcuda.so.535.54.03")
    os.unlink(root + "/etc/ld.so.cache")  # scan dirs: both versions are candidates
    nv = nvidia.discover(Root(root))
    assert nv is not None
    cuda = [f.source for f in nv.files if "libcuda.so" in f.source]
    assert cuda == ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"]


def test_library_links_resolve_inside_host_root(fake_host: FakeHost) -> None:
    root = fake_host(nvidia=1)
    lib = root + "/usr/lib/x86_64-linux-gnu"
    os.unlink(lib + "/libcuda.so.1")
    os.symlink("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", lib + "/libcuda.so.1")  # absolute link
    nv = nvidia.discover(Root(root))
    assert nv is not None
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15" in {f.source for f in nv.files}


def test_gfx_target_names() -> None:
    assert [kfd.gfx_target(v) for v in (90010, 90402, 110000, 100300)] == ["gfx90a", "gfx942", "gfx1100", "gfx1030"]


@pytest.mark.parametrize("only", [frozenset({"nvidia"}), frozenset({"amd"}), frozenset()], ids=repr)
def test_discovery_limited_to_named_vendors(fake_host: FakeHost, only: frozenset[str]) -> None:
    root = Root(fake_host(nvidia=2, amd=2))
    assert {v.vendor for v in discover(root, only).vendors} == only
    assert {v.vendor for v in discover(root).vendors} == {"nvidia", "amd"}


def _still(root: str) -> None:
    """Every directory and file of `root` as if last changed a minute ago: settled, so driver_files remembers."""
    old = os.stat(root).st_mtime - 60
    for folder, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            os.utime(os.path.join(folder, name), (old, old), follow_symlinks=False)
    os.utime(root, (old, old))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = files._driver_files

    def counted(root: Root, version: str | None) -> tuple[tuple[DriverFile, ...], set[str]]:
        calls.append(1)
        return real(root, version)

    monkeypatch.setattr(files, "_driver_files", counted)
    monkeypatch.setattr(files, "_MEMO", {})
    return calls


@pytest.mark.parametrize("cache", [True, False])
def test_driver_files_remembered_until_a_driver_file_changes(fake_host: FakeHost, cache: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_host(nvidia=1)
    lib = root + "/usr/lib/x86_64-linux-gnu"
    if not cache:
        os.unlink(root + "/etc/ld.so.cache")
    _still(root)
    calls = _counting(monkeypatch)
    first = nvidia.discover(Root(root))
    assert first is not None and nvidia.discover(Root(root)) == first and len(calls) == 1
    os.unlink(lib + "/libnvidia-opencl.so.550.54.15")  # an uninstall: the directory changed
    again = nvidia.discover(Root(root))
    assert again is not None and len(calls) == 2
    assert {f.source for f in first.files} - {f.source for f in again.files} == \
        {"/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.550.54.15"}


def test_driver_files_not_remembered_while_a_directory_is_changing(fake_host: FakeHost,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory changed within the file system's clock tick could change again unseen: read every time."""
    root = fake_host(nvidia=1)
    calls = _counting(monkeypatch)
    nvidia.discover(Root(root))
    nvidia.discover(Root(root))
    assert len(calls) == 2
    _still(root)
    files.refresh()  # the warm daemon's turn: reads the unsettled answer again, now settled
    nvidia.discover(Root(root))
    assert len(calls) == 3
    shutil.copy2(root + "/usr/bin/nvidia-smi", root + "/usr/bin/nvidia-debugdump2")  # a tool directory changed
    files.refresh()
    assert len(calls) == 4
