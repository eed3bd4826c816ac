"""Planning tested with literal inventories: no files, no host."""

from __future__ import annotations

import pytest

from gpuhook.edits import DeviceRule, Mount
from gpuhook.errors import PlanError
from gpuhook.host.inventory import DeviceNode, DriverFile, Gpu, Inventory, VendorInventory
from gpuhook.plan.select import plan_edits
from tests.unit.parsing import parse_request


def _node(path: str, major: int, minor: int, mode: int = 0o666, gid: int = 0) -> DeviceNode:
    return DeviceNode(path=path, kind="c", major=major, minor=minor, mode=mode, uid=0, gid=gid)


NV = VendorInventory(
    vendor="nvidia", driver_version="550.54.15",
    gpus=tuple(Gpu(vendor="nvidia", index=i, uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000",
                   pci=f"0000:{0x10 + i:02x}:00.0", model="H100",
              nodes=(_node(f"/dev/nvidia{i}", 195, i),)) for i in range(2)),
    shared_nodes=(_node("/dev/nvidiactl", 195, 255), _node("/dev/nvidia-uvm", 509, 0), _node("/dev/nvidia-uvm-tools",
                                                                                             509, 1),
     _node("/dev/nvidia-modeset", 195, 254)),
    files=(DriverFile("compute", "lib", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"),
     DriverFile("utility", "lib", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15"),
     DriverFile("utility", "bin", "/opt/nv/bin/nvidia-smi", "/usr/bin/nvidia-smi"),
     DriverFile("graphics", "lib", "/usr/lib/nv/libEGL_nvidia.so.550.54.15", "/usr/lib/nv/libEGL_nvidia.so.550.54.15")),
)
AMD = VendorInventory(
    vendor="amd", driver_version=None,
    gpus=tuple(Gpu(vendor="amd", index=i, uuid=hex(0xA0 + i), pci=f"0000:{0x80 + i:02x}:00.0", model="gfx942",
              nodes=(_node(f"/dev/dri/renderD{128 + i}", 226, 128 + i, 0o660, 109),
               _node(f"/dev/dri/card{1 + i}", 226, 1 + i, 0o660, 44)), missing=(), arch="gfx942") for i in range(2)),
    shared_nodes=(_node("/dev/kfd", 511, 0, 0o660, 109),),
)


def _plan(annotations: dict[str, str], env: dict[str, str] | None = None, inv: tuple[VendorInventory, ...] = (NV, AMD),
          root: str = "/"):  # type: ignore[no-untyped-def]
    return plan_edits(parse_request(annotations, env or {}), Inventory(root, inv))


def test_one_nvidia_gpu_by_uuid() -> None:
    e = _plan({"gpuhook.dev/gpus": "GPU-00000001-0000-0000-0000-000000000000"})
    assert [n.path for n in e.device_nodes] == ["/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
                                                "/dev/nvidia-uvm-tools"]
    assert e.device_rules[0] == DeviceRule("c", 195, 1)
    cuda = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
    assert e.mounts == (Mount(cuda, cuda),
                        Mount("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                              "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15"),
                        Mount("/opt/nv/bin/nvidia-smi", "/usr/bin/nvidia-smi"))
    assert e.mounts[0].options == ("ro", "nosuid", "nodev", "bind")
    assert e.ldcache_dirs == ("/usr/lib/x86_64-linux-gnu",)
    assert e.additional_gids == ()


def test_graphics_adds_modeset_and_its_libraries() -> None:
    e = _plan({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/capabilities": "graphics"})
    assert "/dev/nvidia-modeset" in [n.path for n in e.device_nodes]
    assert [m.container_path for m in e.mounts] == ["/usr/lib/nv/libEGL_nvidia.so.550.54.15"]
    assert e.ldcache_dirs == ("/usr/lib/nv",)


def test_host_root_prefixes_mount_sources_only() -> None:
    e = _plan({"gpuhook.dev/gpus": "0"}, inv=(NV,), root="/srv/fake")
    assert e.mounts[0] == Mount("/srv/fake/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
                                "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15")


def test_nvidia_none_gives_driver_without_gpus() -> None:
    e = _plan({}, {"NVIDIA_VISIBLE_DEVICES": "none"})
    assert [n.path for n in e.device_nodes] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    assert e.mounts


def test_amd_by_pci_with_groups() -> None:
    e = _plan({"gpuhook.dev/gpus": "0000:81:00.0"})
    assert [n.path for n in e.device_nodes] == ["/dev/kfd", "/dev/dri/renderD129", "/dev/dri/card2"]
    assert e.additional_gids == (109, 44)
    assert e.mounts == () and e.ldcache_dirs == ()


def test_both_vendors_from_env() -> None:
    e = _plan({}, {"NVIDIA_VISIBLE_DEVICES": "1", "AMD_VISIBLE_DEVICES": "0"})
    paths = [n.path for n in e.device_nodes]
    assert "/dev/nvidia1" in paths and "/dev/dri/renderD128" in paths and "/dev/nvidia0" not in paths


def test_all_of_one_vendor_host() -> None:
    e = _plan({"gpuhook.dev/gpus": "all"}, inv=(AMD,))
    assert [n.path for n in e.device_nodes if "renderD" in n.path] == ["/dev/dri/renderD128", "/dev/dri/renderD129"]


ERRORS = [
    ("ambiguous", {"gpuhook.dev/gpus": "0"}, (NV, AMD), ["ambiguous", "NVIDIA (2 GPUs)", "AMD (2 GPUs)",
                                                       "gpuhook.dev/vendor=nvidia", "gpuhook.dev/vendor=amd"]),
    ("unknown index", {"gpuhook.dev/gpus": "5"}, (NV,), ["gpuhook.dev/gpus='5'", "no NVIDIA GPU 5", "it has: 0"]),
    ("unknown uuid", {"gpuhook.dev/gpus": "0xdead"}, (NV, AMD), ["no AMD GPU 0xdead"]),
    ("no driver", {"gpuhook.dev/gpus": "all"}, (), ["no GPU driver"]),
    ("vendor absent", {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"}, (NV,),
     ["asks for AMD GPUs", "2 NVIDIA GPUs"]),
]


@pytest.mark.parametrize(("annotations", "inv", "needles"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(annotations: dict[str, str], inv: tuple[VendorInventory, ...], needles: list[str]) -> None:
    with pytest.raises(PlanError) as info:
        _plan(annotations, inv=inv)
    for needle in needles:
        assert needle in str(info.value)


def test_missing_node_is_an_error_naming_it() -> None:
    gpu = Gpu(vendor="nvidia", index=0, uuid="GPU-00000000-0000-0000-0000-000000000000", pci="0000:10:00.0",
              model="H100", nodes=(), missing=("/dev/nvidia0",))
    inv = VendorInventory(vendor="nvidia", driver_version="1", gpus=(gpu,), shared_nodes=())
    with pytest.raises(PlanError, match="no device node /dev/nvidia0"):
        _plan({"gpuhook.dev/gpus": "0"}, inv=(inv,))


DOCKER_GPUS = {"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook",
                             "args": ["nvidia-container-runtime-hook", "prestart"]}]}
FLAG = [  # Docker's --gpus, as the env dockerd sets: (host, env value, [policy] gpus_any_vendor) -> nodes or error
    ("nvidia host: all", (NV,), "all", True, ["/dev/nvidia0", "/dev/nvidia1"]),
    ("amd-only host: all", (AMD,), "all", True, ["/dev/dri/renderD128", "/dev/dri/card1", "/dev/dri/renderD129",
                                                 "/dev/dri/card2"]),
    ("amd-only host: a count", (AMD,), "0", True, ["/dev/dri/renderD128", "/dev/dri/card1"]),
    ("amd-only host, nvidia driver without GPUs", (VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=(),
                                                                   shared_nodes=()), AMD), "1", True,
     ["/dev/dri/renderD129", "/dev/dri/card2"]),
    ("mixed host: nvidia", (NV, AMD), "1", True, ["/dev/nvidia1"]),
    ("amd-only host, policy off", (AMD,), "all", False,
     "--gpus='all' asks for NVIDIA GPUs but the host has 2 AMD GPUs; [policy] gpus_any_vendor = true lets --gpus"),
    ("amd-only host: a GPU it lacks", (AMD,), "2", True, "--gpus='2': no AMD GPU 2 on this host (2 AMD GPUs)"),
]


@pytest.mark.parametrize(("inv", "value", "any_vendor", "expected"), [f[1:] for f in FLAG], ids=[f[0] for f in FLAG])
def test_docker_gpus_flag(inv: tuple[VendorInventory, ...], value: str, any_vendor: bool,
                          expected: list[str] | str) -> None:
    from tests.unit.parsing import gpus_flag

    request = parse_request({}, {"NVIDIA_VISIBLE_DEVICES": value}, flag=gpus_flag(DOCKER_GPUS), any_vendor=any_vendor)
    if isinstance(expected, str):
        with pytest.raises(PlanError) as info:
            plan_edits(request, Inventory("/", inv))
        assert expected in str(info.value)
        return
    nodes = [n.path for n in plan_edits(request, Inventory("/", inv)).device_nodes]
    assert [n for n in nodes if "nvidiactl" not in n and "uvm" not in n and n != "/dev/kfd"] == expected
