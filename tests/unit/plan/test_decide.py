"""plan/prepare.decide, the GPU path's one decision, tested with literals: a request, an inventory, the facts
gathered and the policy in, the Edits (device nodes, mounts, env, hooks, hardening), the tuning and the records'
fields out, or the error a user sees. No files, no host."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhook.config import Config, Policy, TuningPolicy
from gpuhook.edits import DeviceNode
from gpuhook.errors import PlanError, PolicyError, RequestError
from gpuhook.host.facts import HostFacts
from gpuhook.host.inventory import DriverFile, Gpu, Inventory, VendorInventory
from gpuhook.host.rocm_trees import RocmTree
from gpuhook.plan.prepare import Prepared, decide
from gpuhook.request.container import HostRocm, Request, Selection
from gpuhook.request.tuning import Tuning


def _node(path: str, major: int, minor: int, mode: int = 0o666, gid: int = 0) -> DeviceNode:
    return DeviceNode(path=path, kind="c", major=major, minor=minor, mode=mode, uid=0, gid=gid)


NV0, NV1 = "GPU-00000000-0000-0000-0000-000000000000", "GPU-00000001-0000-0000-0000-000000000000"
MIG0 = "MIG-00000000-0000-4000-8000-c0ffee000000"
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
LIBNVML = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15"
LIBEGL = "/usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.550.54.15"
LIBNVCUVID = "/usr/lib/x86_64-linux-gnu/libnvcuvid.so.550.54.15"
GPU0 = Gpu(vendor="nvidia", index=0, uuid=NV0, pci="0000:10:00.0", model="H100", nodes=(_node("/dev/nvidia0", 195, 0),))
GPU1 = Gpu(vendor="nvidia", index=1, uuid=NV1, pci="0000:11:00.0", model="H100", nodes=(_node("/dev/nvidia1", 195, 1),))
MIGS = tuple(Gpu(vendor="nvidia", index=0, uuid=uuid, pci="0000:10:00.0", model="H100",
                 nodes=(GPU0.nodes[0], _node(f"/dev/nvidia-caps/nvidia-cap{gi * 9 + 3}", 237, gi * 9 + 3, 0o444),
                        _node(f"/dev/nvidia-caps/nvidia-cap{gi * 9 + 4}", 237, gi * 9 + 4, 0o444)),
                 parent=NV0, slice=f"0:{mig}", profile="3g.40gb", place=f"gi{gi}/ci0")
             for mig, gi, uuid in ((0, 1, MIG0), (1, 2, "MIG-00000000-0001-4000-8000-c0ffee000001")))
NVIDIA = VendorInventory(
    vendor="nvidia", driver_version="550.54.15", gpus=(GPU0, GPU1),
    shared_nodes=(_node("/dev/nvidiactl", 195, 255), _node("/dev/nvidia-uvm", 509, 0),
                  _node("/dev/nvidia-uvm-tools", 509, 1), _node("/dev/nvidia-modeset", 195, 254)),
    files=(DriverFile("compute", "lib", LIBCUDA, LIBCUDA), DriverFile("utility", "lib", LIBNVML, LIBNVML),
           DriverFile("utility", "bin", "/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"),
           DriverFile("graphics", "lib", LIBEGL, LIBEGL), DriverFile("video", "lib", LIBNVCUVID, LIBNVCUVID)),
    slices=MIGS)
AMD = VendorInventory(
    vendor="amd", driver_version="6.8.5", shared_nodes=(_node("/dev/kfd", 511, 0, 0o660, 109),),  # ROCm 6.2's
    gpus=tuple(Gpu(vendor="amd", index=i, uuid=hex(0xA0 + i), pci=f"0000:{0x80 + i:02x}:00.0", model="MI300X",
                   nodes=(_node(f"/dev/dri/renderD{128 + i}", 226, 128 + i, 0o660, 109),
                          _node(f"/dev/dri/card{1 + i}", 226, 1 + i, 0o660, 44)),
                   arch="gfx942", sysfs=f"/sys/devices/pci0000:80/0000:{0x80 + i:02x}:00.0") for i in range(2)))

# what the rows share: the default policy keeps /sys read-only; NVIDIA's control nodes, its default capabilities'
# (compute, utility) files and their linker-cache directory
CONTROL = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
COMPUTE_UTILITY = [(LIBCUDA, LIBCUDA), (LIBNVML, LIBNVML), ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi")]
LIBS = ["/usr/lib/x86_64-linux-gnu"]
NV_DRIVER = [("nvidia", "550.54.15")]
AMD_NODES = ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/card1"]
HOOK_ENV = ("GPUHOOK_CONFIG=/etc/gpuhook/config.toml", "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
TUNING_HOOKS = [("prestart", "/usr/local/bin/gpuhook-hook", ("gpuhook", "hook", "prestart"), HOOK_ENV, 30),
                ("poststop", "/usr/local/bin/gpuhook-hook", ("gpuhook", "hook", "poststop"), HOOK_ENV, 30)]
NONE: dict[str, Any] = {"nodes": [], "mounts": [], "env": [], "gids": [], "hooks": [], "masked": [],
                        "readonly": ["/sys"], "ldcache": [], "warnings": [], "drivers": [], "settings": [],
                        "exclusive": [], "gpus": [], "procfs": [], "host_rocm": None, "directories": [],
        "shared_memory": []}


def _sel(vendor: str | None, devices: tuple[str, ...] | None, raw: str, source: str = "gpuhook.dev/gpus") -> Selection:
    return Selection(vendor=vendor, devices=devices, source=source, raw=raw)


NO_TUNING, POLICY, TUNING_POLICY = Tuning(), Policy(), TuningPolicy()  # the defaults


def _ask(*selections: Selection, capabilities: tuple[str, ...] = ("compute", "utility"), tuning: Tuning = NO_TUNING,
         host_rocm: HostRocm | None = None) -> Request:
    return Request(selections=selections, capabilities=frozenset(capabilities), host_rocm=host_rocm,
                   host_rocm_asked=host_rocm is not None, tuning=tuning)


def _spec(env: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
          devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"process": {"env": [f"{k}={v}" for k, v in (env or {}).items()]}, "annotations": annotations or {},
            "linux": {"devices": devices or []}}


def _config(policy: Policy = POLICY, tuning: TuningPolicy = TUNING_POLICY) -> Config:
    return Config(path="/etc/gpuhook/config.toml", policy=policy, tuning=tuning)


def _shown(p: Prepared) -> dict[str, Any]:
    """The decision as the rows below write it (each device node's cgroup rule is checked apart)."""
    e = p.edits
    return {"nodes": [n.path for n in e.device_nodes],
            "mounts": [(m.host_path, m.container_path) + (() if m.options == ("ro", "nosuid", "nodev", "bind")
                                                          else (m.options,)) for m in e.mounts],
            "env": list(e.env), "gids": list(e.additional_gids),
            "hooks": [(h.stage, h.path, h.args, h.env, h.timeout) for h in e.hooks],
            "masked": list(e.masked_paths), "readonly": list(e.readonly_mounts), "ldcache": list(e.ldcache_dirs),
            "warnings": list(p.warnings), "drivers": list(p.drivers),
            "settings": [(s.vendor, s.gpu, s.name, s.value) for s in p.settings], "exclusive": list(p.exclusive),
            "gpus": list(p.gpus), "procfs": [(c.vendor, c.target, c.files) for c in p.procfs],
            "host_rocm": p.host_rocm, "directories": list(p.directories),
            "shared_memory": list(p.shared_memory)}


NV_ONE = _ask(_sel("nvidia", ("0",), "0"))
AMD_ONE = _ask(_sel("amd", ("0",), "0"))
FOUND = HostFacts(image_read=True)  # an image was there to read, holding nothing of note
REQUIRE_CUDA = _spec({"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"})
OLD_DRIVER = HostFacts(host_cuda="12.2")

# (id, request, vendors on the host, facts, spec, policy, the decision's fields that are not NONE's)
DECISIONS: list[tuple[str, Request, tuple[VendorInventory, ...], HostFacts, dict[str, Any], Config, dict[str, Any]]] = [
    ("nvidia-one", NV_ONE, (NVIDIA, AMD), HostFacts(), _spec(), _config(),
     {"nodes": ["/dev/nvidia0", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV0]}),
    ("nvidia-all-with-its-mig-devices", _ask(_sel("nvidia", None, "all")), (NVIDIA,), HostFacts(), _spec(), _config(),
     {"nodes": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13",
                "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22", *CONTROL],
      "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV0, NV1, MIG0, "MIG-00000000-0001-4000-8000-c0ffee000001"]}),
    ("nvidia-mig-device", _ask(_sel("nvidia", (MIG0,), MIG0)), (NVIDIA,), HostFacts(), _spec(), _config(),
     {"nodes": ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13", *CONTROL],
      "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER, "gpus": [MIG0, NV0]}),
    ("nvidia-compute-only", _ask(_sel("nvidia", ("1",), "1"), capabilities=("compute",)), (NVIDIA,), HostFacts(),
     _spec(), _config(),
     {"nodes": ["/dev/nvidia1", *CONTROL], "mounts": [(LIBCUDA, LIBCUDA)], "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV1]}),
    ("nvidia-graphics-and-video", _ask(_sel("nvidia", ("0",), "0"), capabilities=("graphics", "video")), (NVIDIA,),
     HostFacts(), _spec(), _config(),
     {"nodes": ["/dev/nvidia0", *CONTROL, "/dev/nvidia-modeset"], "mounts": [(LIBEGL, LIBEGL),
                                                                           (LIBNVCUVID, LIBNVCUVID)],
      "ldcache": LIBS, "drivers": NV_DRIVER, "gpus": [NV0]}),
    # count:1 as the count pick (gpu_path/granting.pick_free) hands it on: the free GPU it got, by UUID
    ("nvidia-count-resolved", _ask(_sel("nvidia", (NV1,), "count:1")), (NVIDIA, AMD), HostFacts(), _spec(), _config(),
     {"nodes": ["/dev/nvidia1", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV1]}),
    ("nvidia-none-is-the-driver-without-gpus", _ask(_sel("nvidia", (), "none", "NVIDIA_VISIBLE_DEVICES")), (NVIDIA,),
     HostFacts(), _spec(), _config(),
     {"nodes": CONTROL, "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER}),
    ("nvidia-procfs-copy", NV_ONE, (NVIDIA, AMD),
     HostFacts(procfs=(("nvidia", "/proc/driver/nvidia", (("params", "ModifyDeviceFiles: 0\n"),)),
                       ("amd", "/proc/none", ()))), _spec(), _config(),
     {"nodes": ["/dev/nvidia0", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV0], "procfs": [("nvidia", "/proc/driver/nvidia", (("params", "ModifyDeviceFiles: 0\n"),))]}),
    ("nvidia-sys-writable-by-policy", NV_ONE, (NVIDIA,), HostFacts(), _spec(), _config(Policy(readonly_sys=False)),
     {"nodes": ["/dev/nvidia0", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV0], "readonly": []}),
    ("nvidia-cuda-met", NV_ONE, (NVIDIA,), HostFacts(host_cuda="12.4"), REQUIRE_CUDA, _config(),
     {"nodes": ["/dev/nvidia0", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV0]}),
    ("nvidia-cuda-forward-compat", NV_ONE, (NVIDIA,),
     HostFacts(host_cuda="12.2", image_read=True, compat_dir="/usr/local/cuda-12.8/compat",
               compat_versions=("570.86.10",)), REQUIRE_CUDA, _config(),
     {"nodes": ["/dev/nvidia0", *CONTROL], "mounts": COMPUTE_UTILITY,
      "ldcache": ["/usr/local/cuda-12.8/compat", *LIBS], "drivers": NV_DRIVER, "gpus": [NV0],
      "warnings": ["host driver 550.54.15 supports CUDA 12.2; using the image's CUDA 12.8 forward-compatibility "
                   "libraries in /usr/local/cuda-12.8/compat"]}),
    ("nvidia-clocks-and-its-hooks", _ask(_sel("nvidia", ("0",), "0"), tuning=Tuning(clocks=(1500, 1500))), (NVIDIA,),
     HostFacts(), _spec(), _config(),
     {"nodes": ["/dev/nvidia0", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV0], "hooks": TUNING_HOOKS, "settings": [("nvidia", NV0, "clocks", "1500-1500")]}),
    # a MIG device's clocks are its GPU's: allowed on one slice only where the admin lets slices tune their GPU
    ("nvidia-mig-clocks-on-its-gpu", _ask(_sel("nvidia", (MIG0,), MIG0), tuning=Tuning(clocks=(1500, 1500))),
     (NVIDIA,), HostFacts(), _spec(), _config(tuning=TuningPolicy(shared_slices=True)),
     {"nodes": ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13", *CONTROL],
      "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER, "gpus": [MIG0, NV0], "hooks": TUNING_HOOKS,
      "settings": [("nvidia", NV0, "clocks", "1500-1500")]}),
    ("nvidia-exclusive", _ask(_sel("nvidia", ("1",), "1"), tuning=Tuning(exclusive=True)), (NVIDIA,),
     HostFacts(users=((NV0, "web"),)), _spec(), _config(),
     {"nodes": ["/dev/nvidia1", *CONTROL], "mounts": COMPUTE_UTILITY, "ldcache": LIBS, "drivers": NV_DRIVER,
      "gpus": [NV1], "hooks": TUNING_HOOKS, "exclusive": [NV1]}),
    ("nvidia-mps", _ask(_sel("nvidia", ("0",), "0"), tuning=Tuning(mps=True, mps_threads=50)), (NVIDIA,), HostFacts(),
     _spec(), _config(tuning=TuningPolicy(mps_dir="/run/gpuhook/mps")),
     {"nodes": ["/dev/nvidia0", *CONTROL],
      "mounts": [*COMPUTE_UTILITY,
                 (f"/run/gpuhook/mps/{NV0}/pipe", "/tmp/nvidia-mps", ("rw", "nosuid", "nodev", "bind")),
                 (f"/run/gpuhook/mps/{NV0}/shm/shared", "/dev/shm", ("rw", "nosuid", "nodev", "noexec", "bind")),
                 (f"/run/gpuhook/mps/{NV0}/log", "/var/log/nvidia-mps", ("ro", "nosuid", "nodev", "noexec", "bind"))],
      "env": ["CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps",
              "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"],
      "ldcache": LIBS, "drivers": NV_DRIVER, "gpus": [NV0], "hooks": TUNING_HOOKS,
      "settings": [("nvidia", NV0, "mps", f"/run/gpuhook/mps/{NV0}")],
      "directories": [f"/run/gpuhook/mps/{NV0}/pipe", f"/run/gpuhook/mps/{NV0}/log"],
      "shared_memory": [f"/run/gpuhook/mps/{NV0}/shm"]}),
    ("nvidia-tuning-for-a-device-plugins-nodes", _ask(tuning=Tuning(power_limit=300)), (NVIDIA,), HostFacts(),
     _spec(devices=[{"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1}]), _config(),
     {"hooks": TUNING_HOOKS, "drivers": NV_DRIVER, "gpus": [NV1],
      "settings": [("nvidia", NV1, "power_limit", "300000")]}),
    ("amd-one", AMD_ONE, (NVIDIA, AMD), FOUND, _spec(), _config(),
     {"nodes": AMD_NODES, "gids": [109, 44], "masked": ["/sys/class/kfd/kfd/proc"], "drivers": [("amd", "6.8.5")],
      "gpus": ["0xa0"]}),
    ("amd-all-kfd-proc-shown-by-policy", _ask(_sel("amd", None, "all")), (AMD,), FOUND, _spec(),
     _config(Policy(mask_kfd_proc=False)),
     {"nodes": ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/card1", "/dev/dri/renderD129", "/dev/dri/card2"],
      "gids": [109, 44], "drivers": [("amd", "6.8.5")], "gpus": ["0xa0", "0xa1"]}),
    ("amd-image-rocm-outside-the-window-warns", AMD_ONE, (AMD,), HostFacts(image_read=True, image_rocm="5.7.1"),
     _spec(), _config(),
     {"nodes": AMD_NODES, "gids": [109, 44], "masked": ["/sys/class/kfd/kfd/proc"], "drivers": [("amd", "6.8.5")],
      "gpus": ["0xa0"],
      "warnings": ["the image ships ROCm 5.7.1 but the host amdgpu driver 6.8.5 (ROCm 6.2) supports ROCm user space "
                   "6.0 to 6.4: use an image with ROCm 6.0-6.4 or a host driver that supports 5.7.1"]}),
    ("amd-host-rocm", _ask(_sel("amd", ("1",), "1"), host_rocm=HostRocm()), (AMD,),
     HostFacts(image_read=True, rocm_trees=(RocmTree(version="6.2.1", path="/opt/rocm-6.2.1",
                                                     lib_dirs=("/opt/rocm-6.2.1/lib",)),)),
     _spec({"PATH": "/usr/bin"}), _config(),
     {"nodes": ["/dev/kfd", "/dev/dri/renderD129", "/dev/dri/card2"], "gids": [109, 44],
      "mounts": [("/opt/rocm-6.2.1", "/opt/rocm-6.2.1", ("rbind", "ro", "nosuid", "nodev")),
                 ("/opt/rocm-6.2.1", "/opt/rocm", ("rbind", "ro", "nosuid", "nodev"))],
      "env": ["ROCM_PATH=/opt/rocm-6.2.1", "PATH=/opt/rocm-6.2.1/bin:/usr/bin"], "ldcache": ["/opt/rocm-6.2.1/lib"],
      "masked": ["/sys/class/kfd/kfd/proc"], "drivers": [("amd", "6.8.5")], "gpus": ["0xa1"], "host_rocm": "6.2.1"}),
    ("amd-perf-level-and-fine-grain-env",
     _ask(_sel("amd", ("0",), "0"), tuning=Tuning(perf_level="high", env=("HSA_FORCE_FINE_GRAIN_PCIE=1",))), (AMD,),
     FOUND, _spec(), _config(),
     {"nodes": AMD_NODES, "gids": [109, 44], "masked": ["/sys/class/kfd/kfd/proc"], "env": [
         "HSA_FORCE_FINE_GRAIN_PCIE=1"], "hooks": TUNING_HOOKS, "drivers": [("amd", "6.8.5")], "gpus": ["0xa0"],
      "settings": [("amd", "0xa0", "perf_level", "high")]}),
    ("nvidia-and-amd", _ask(_sel("nvidia", ("1",), "1", "NVIDIA_VISIBLE_DEVICES"),
                            _sel("amd", ("0",), "0", "AMD_VISIBLE_DEVICES")), (NVIDIA, AMD), FOUND, _spec(), _config(),
     {"nodes": ["/dev/nvidia1", *CONTROL, *AMD_NODES], "mounts": COMPUTE_UTILITY, "ldcache": LIBS,
      "gids": [109, 44], "masked": ["/sys/class/kfd/kfd/proc"], "drivers": [*NV_DRIVER, ("amd", "6.8.5")],
      "gpus": [NV1, "0xa0"]}),
]


@pytest.mark.parametrize(("request_", "vendors", "facts", "spec", "config", "want"), [d[1:] for d in DECISIONS],
                         ids=[d[0] for d in DECISIONS])
def test_decide(request_: Request, vendors: tuple[VendorInventory, ...], facts: HostFacts, spec: dict[str, Any],
                config: Config, want: dict[str, Any]) -> None:
    prepared = decide(request_, Inventory("/", vendors), facts, spec, config, "/usr/local/bin/gpuhook-hook")
    assert _shown(prepared) == {**NONE, **want}
    assert [(r.kind, r.major, r.minor, r.access) for r in prepared.edits.device_rules] == \
        [(n.kind, n.major, n.minor, "rwm") for n in prepared.edits.device_nodes]


def test_the_warm_helpers_socket_reaches_the_tuning_hooks() -> None:
    prepared = decide(_ask(_sel("nvidia", ("0",), "0"), tuning=Tuning(fan="auto")), Inventory("/", (NVIDIA,)),
                      HostFacts(), _spec(), _config(), "/usr/local/bin/gpuhook-hook",
                      ("GPUHOOK_WARM_SOCKET=/run/gpuhook/warm.sock",))
    assert [h.env for h in prepared.edits.hooks] == [(*HOOK_ENV, "GPUHOOK_WARM_SOCKET=/run/gpuhook/warm.sock")] * 2


LEASED = HostFacts(ledger={"leases": {NV0: {"id": "trainer", "pid": 7, "start": "1"}}, "settings": {}})

# (id, request, vendors on the host, facts, spec, policy, the error and its message, exactly)
REFUSALS: list[tuple[str, Request, tuple[VendorInventory, ...], HostFacts, dict[str, Any], Config, type[Exception],
                     str]] = [
    ("no-gpu-driver", _ask(_sel(None, None, "all")), (), HostFacts(), _spec(), _config(), PlanError,
     "gpuhook.dev/gpus='all' asks for GPUs but the host (root /) has no GPU driver loaded: no /proc/driver/nvidia, "
     "no /sys/class/kfd"),
    ("no-such-gpu", _ask(_sel("nvidia", ("7",), "7")), (NVIDIA,), HostFacts(), _spec(), _config(), PlanError,
     f"gpuhook.dev/gpus='7': no NVIDIA GPU 7 on this host (2 NVIDIA GPUs); it has: 0 ({NV0}), 1 ({NV1}); slices "
     f"0:0 ({MIG0}), 0:1 (MIG-00000000-0001-4000-8000-c0ffee000001)"),
    ("vendor-absent", AMD_ONE, (NVIDIA,), HostFacts(), _spec(), _config(), PlanError,
     "gpuhook.dev/gpus='0' asks for AMD GPUs but the host has 2 NVIDIA GPUs"),
    ("tuning-without-gpus", _ask(tuning=Tuning(power_limit=300)), (NVIDIA,), HostFacts(), _spec(), _config(),
     RequestError, "the gpuhook.dev/ tuning annotations need GPUs: add gpuhook.dev/gpus, or give the container GPU "
                   "device nodes (a device plugin, --device)"),
    ("cuda-too-new-for-the-driver", NV_ONE, (NVIDIA,), OLD_DRIVER, REQUIRE_CUDA, _config(), PolicyError,
     "image requires cuda>=12.4 but the host driver 550.54.15 supports CUDA 12.2: upgrade the driver to >= "
     "550.54.14, use an image for CUDA <= 12.2, or set NVIDIA_DISABLE_REQUIRE=1"),
    ("brand-unmet", NV_ONE, (NVIDIA,), HostFacts(nvml=((NV0, "9.0", "geforce"),)),
     _spec(annotations={"gpuhook.dev/require": "brand=tesla"}), _config(), PolicyError,
     f"image requires brand=tesla (gpuhook.dev/require='brand=tesla') but GPU 0 ({NV0}) has brand geforce: pick "
     "other GPUs with gpuhook.dev/gpus, use an image built for brand geforce, or change gpuhook.dev/require"),
    ("image-rocm-refused-when-strict", AMD_ONE, (AMD,), HostFacts(image_read=True, image_rocm="5.7.1"), _spec(),
     _config(Policy(rocm_compatibility="strict")), PolicyError,
     "the image ships ROCm 5.7.1 but the host amdgpu driver 6.8.5 (ROCm 6.2) supports ROCm user space 6.0 to 6.4: "
     "use an image with ROCm 6.0-6.4 or a host driver that supports 5.7.1 (refused by [policy] rocm_compatibility "
     "= \"strict\")"),
    ("host-rocm-on-nvidia", _ask(_sel("nvidia", ("0",), "0"), host_rocm=HostRocm()), (NVIDIA,),
     HostFacts(host_cuda="12.4"), _spec({"CUDA_VERSION": "12.4.1"}), _config(), RequestError,
     "gpuhook.dev/host-rocm mounts the host's ROCm for AMD GPUs, but this container's GPUs are nvidia"),
    ("host-rocm-on-nvidia-without-a-requirement", _ask(_sel("nvidia", ("0",), "0"), host_rocm=HostRocm()), (NVIDIA,),
     HostFacts(), _spec(), _config(), RequestError,
     "gpuhook.dev/host-rocm mounts the host's ROCm for AMD GPUs, but this container's GPUs are nvidia"),
    ("dev-is-a-link", NV_ONE, (NVIDIA,), HostFacts(dev_link="/host/dev"), _spec(), _config(), PolicyError,
     "the image's /dev is a symbolic link (to '/host/dev'): runc follows it out of the container when it sets up "
     "/dev, so gpuhook refuses to start this GPU container"),
    ("leased-by-another", NV_ONE, (NVIDIA,), LEASED, _spec(), _config(), PolicyError,
     f"GPU {NV0} is held exclusively by container trainer: wait for it to stop or pick other GPUs"),
    ("leased-gpu-of-a-mig-device", _ask(_sel("nvidia", ("0:1",), "0:1")), (NVIDIA,), LEASED, _spec(), _config(),
     PolicyError, f"GPU {NV0} is held exclusively by container trainer: wait for it to stop or pick other GPUs"),
    ("exclusive-on-a-gpu-in-use", _ask(_sel("nvidia", ("0",), "0"), tuning=Tuning(exclusive=True)), (NVIDIA,),
     HostFacts(users=((NV0, "web"),)), _spec(), _config(), PolicyError,
     f"gpuhook.dev/exclusive: GPU {NV0} is in use by container web: wait for it to stop"),
    ("tuning-not-allowed", _ask(_sel("nvidia", ("0",), "0"), tuning=Tuning(clocks=(1500, 1500))), (NVIDIA,),
     HostFacts(), _spec(), _config(tuning=TuningPolicy(allow=False)), PolicyError,
     "this host does not allow GPU tuning ([policy] allow_tuning = false): remove the gpuhook.dev/ tuning "
     "annotations"),
    ("clocks-on-a-shared-mig-device", _ask(_sel("nvidia", (MIG0,), MIG0), tuning=Tuning(clocks=(1500, 1500))),
     (NVIDIA,), HostFacts(), _spec(), _config(), PolicyError,
     f"gpuhook.dev/clocks on a shared GPU (slice 0:0 of the whole GPU 0 ({NV0}), whose other slices this container "
     "lacks: not 0:1 (MIG-00000000-0001-4000-8000-c0ffee000001)): clocks, power limit, fans and performance level "
     "are the whole GPU's: on a shared GPU the admin sets them, not a tenant; ask for every slice of the GPU, or the "
     "admin allows clocks, power, fans and performance level with [tuning] shared_slices = true, or drop "
     "gpuhook.dev/clocks"),
    ("mps-on-a-mig-device", _ask(_sel("nvidia", (MIG0,), MIG0), tuning=Tuning(mps=True)), (NVIDIA,), HostFacts(),
     _spec(), _config(), RequestError, "gpuhook.dev/mps on MIG device 0:0: gpuhook runs MPS on whole GPUs only; ask "
                                       "for a whole GPU, or use the MIG device without MPS"),
    ("amd-env-on-nvidia", _ask(_sel("nvidia", ("0",), "0"), tuning=Tuning(env=("HSA_FORCE_FINE_GRAIN_PCIE=1",))),
     (NVIDIA,), HostFacts(), _spec(), _config(), RequestError,
     "gpuhook.dev/fine-grain-pcie and gpuhook.dev/gfx-override are AMD runtime settings, but this container's GPUs "
     "are nvidia"),
    ("compute-mode-on-amd", _ask(_sel("amd", ("0",), "0"), tuning=Tuning(compute_mode="prohibited")), (AMD,),
     FOUND, _spec(), _config(), RequestError,
     "gpuhook.dev/compute-mode='prohibited' is an NVIDIA setting but GPU 0 is AMD: use gpuhook.dev/perf-level"),
]


@pytest.mark.parametrize(("request_", "vendors", "facts", "spec", "config", "error", "message"),
                         [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_decide_refuses(request_: Request, vendors: tuple[VendorInventory, ...], facts: HostFacts,
                        spec: dict[str, Any], config: Config, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        decide(request_, Inventory("/", vendors), facts, spec, config, "/usr/local/bin/gpuhook-hook")
    assert type(info.value) is error and str(info.value) == message
