"""The core scenarios against the installed product only, in every flavour (conftest.py): what the container
sees, and which path served it, read from the kernel (strace's execve record of the runtime and its hooks) rather
than from what gpuhook says. A flavour that loses its native front ends, or a fallback that gives a container
something else than its native twin, fails here."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config
from gpuhook.testing.simulate import HostSpec, build_host

from .conftest import Product

ENTRY_POINTS = ("gpuhook-runtime", "gpuhook-runtime-py", "gpuhook-createhook", "gpuhook-hook", "gpuhook",
                "nvidia-container-runtime-hook", "nvidia-container-runtime-hook-py")
NVIDIA = {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"}
AMD = {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "amd"}
# Which of the product's executables each flavour runs for a container asking for GPUs, through the shim:
# the native front end hands the work to Python (native, deb) or to a warm worker (python: no native front end at
# all); the shim writes the container's linker cache itself, so no hook of gpuhook's runs for it ...
GPU_PATH = {"native": {"gpuhook-runtime", "gpuhook-runtime-py"},
            "warm": {"gpuhook-runtime"},
            "python": {"gpuhook-runtime"},
            "deb": {"gpuhook-runtime", "gpuhook-runtime-py"},
            "rpm": {"gpuhook-runtime", "gpuhook-runtime-py"}}
GPU_PATH.update({"debian11": GPU_PATH["deb"], "debian13": GPU_PATH["deb"], "debian11-warm": GPU_PATH["warm"]})
# ... but NVIDIA's procfs copy takes the createContainer hook (runc refuses spec mounts in /proc): the native
# helper, or the host's sh per copy where it was not built
PROCFS = {flavour: set() if flavour == "python" else {"gpuhook-createhook"} for flavour in GPU_PATH}
# ... and for the hooks gpuhook writes (tuning, hooks.d): the native hook front end, and Python behind it unless warm
HOOKS = {"native": {"gpuhook-hook", "gpuhook"}, "warm": {"gpuhook-hook"}, "python": {"gpuhook"},
         "deb": {"gpuhook-hook", "gpuhook"}, "rpm": {"gpuhook-hook", "gpuhook"}}
HOOKS.update({"debian11": HOOKS["deb"], "debian13": HOOKS["deb"], "debian11-warm": HOOKS["warm"]})
# ... and for Docker's --gpus hook: its native front end (a link to gpuhook-hook), Python behind it unless warm
GPUS_HOOK = {"native": {"nvidia-container-runtime-hook", "nvidia-container-runtime-hook-py"},
             "warm": {"nvidia-container-runtime-hook"}, "python": {"nvidia-container-runtime-hook"},
             "deb": {"nvidia-container-runtime-hook", "nvidia-container-runtime-hook-py"},
             "rpm": {"nvidia-container-runtime-hook", "nvidia-container-runtime-hook-py"}}
GPUS_HOOK.update({"debian11": GPUS_HOOK["deb"], "debian13": GPUS_HOOK["deb"], "debian11-warm": GPUS_HOOK["warm"]})


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """2 NVIDIA + 2 AMD GPUs, amdgpu-dkms 6.8.5 and the host's ROCm 6.2.1 (for slim images)."""
    spec = HostSpec(nvidia=2, amd=2, amd_driver="6.8.5", host_rocm=("6.2.1",))
    return build_host(str(tmp_path_factory.mktemp("host") / "host"), spec)


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("image") / "rootfs")
    make_rootfs(path)
    return path


@dataclass
class Ran:
    rc: int
    out: str
    err: str
    spec_before: bytes
    spec_after: bytes
    served: set[str]  # the product's executables that ran (their names)
    native_runtime: bool  # the gpuhook-runtime that ran is an ELF binary


@dataclass
class Site:
    product: Product
    host: str
    rootfs: str
    config: Path
    tmp: Path

    def run(self, script: str, annotations: dict[str, str] | None = None, env: dict[str, str] | None = None,
            hook_mode: bool = False, edit: Callable[[dict[str, Any]], None] | None = None) -> Ran:
        """`gpuhook-runtime run` (or plain runc with `edit`'s hooks), traced; the container is gone after."""
        cid = f"inst-{uuid.uuid4().hex[:10]}"
        bundle = self.tmp / cid
        spec = oci_config(["sh", "-c", script], env=env, annotations=annotations, uid=1000, gid=1000)
        if edit:
            edit(spec)
        make_bundle(str(bundle), spec, self.rootfs)
        before = (bundle / "config.json").read_bytes()
        trace = self.tmp / f"{cid}.trace"
        args = ["--log", str(self.tmp / f"{cid}.log"), "--log-format", "json", "run", "--bundle", str(bundle), cid]
        runtime = self.product.host_argv("runc", *args) if hook_mode else self.product.argv("gpuhook-runtime", *args)
        proc = subprocess.run(["strace", "-f", "-qq", "-s", "4096", "-e", "trace=execve", "-e", "signal=none",
                               "-o", str(trace), *runtime],
                              env=self.product.env(self.config), capture_output=True, text=True, timeout=120,
                              check=False)
        subprocess.run(self.product.host_argv("runc", "delete", "-f", cid), capture_output=True, check=False)
        served = _served(trace.read_text(), (self.product.bindir, self.product.home))
        with open(self.product.here(Path(self.product.cmd("gpuhook-runtime"))), "rb") as f:
            elf = f.read(4) == b"\x7fELF"
        return Ran(proc.returncode, proc.stdout, proc.stderr, before, (bundle / "config.json").read_bytes(), served,
                   elf)


def _served(trace: str, dirs: tuple[Path, ...]) -> set[str]:
    """The names of the product's executables (in `dirs`) that an execve started, from strace's record. A process
    that executes the file it already runs (the single binary's bootloader does) has not started another."""
    homes = {os.path.realpath(d) for d in dirs}
    names = set()
    running: dict[str, str] = {}  # pid -> the file it runs
    for line in trace.splitlines():
        if "execve(" not in line or not line.rstrip().endswith("= 0"):
            continue
        pid, path = line.split()[0], line.split('execve("', 1)[1].split('"', 1)[0]
        again = running.get(pid) == os.path.realpath(path)
        running[pid] = os.path.realpath(path)
        if not again and os.path.realpath(os.path.dirname(path)) in homes and os.path.basename(path) in ENTRY_POINTS:
            names.add(os.path.basename(path))
    return names


@pytest.fixture(scope="module")
def configured(product: Product, host: str, rootfs: str) -> Site:
    """The flavour's config on the host, after the first container: the one that lets the Python side write the
    files its native front ends decide from (cached.h), as on a host after its first container."""
    config = product.work / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{product.work}/state"\n')
    first = Site(product, host, rootfs, config, product.work).run("true")
    assert first.rc == 0, first.err
    return Site(product, host, rootfs, config, product.work)


@pytest.fixture
def site(configured: Site, tmp_path: Path) -> Site:
    return Site(configured.product, configured.host, configured.rootfs, configured.config, tmp_path)


def test_the_front_end_is_what_the_flavour_installs(site: Site) -> None:
    ran = site.run("echo alive; ls /dev")
    assert ran.rc == 0 and "alive" in ran.out, ran.err
    assert "nvidia" not in ran.out and "kfd" not in ran.out  # nothing asked, nothing given
    assert ran.native_runtime == (site.product.flavour != "python")
    assert ran.served == {"gpuhook-runtime"}  # pass-through: no Python behind the native front end, none at all
    assert ran.spec_after == ran.spec_before


def test_nvidia_gpu(site: Site) -> None:
    ran = site.run("ls /dev | grep nvidia; grep -c libcuda.so.1 /etc/ld.so.cache; dlopen-probe libcuda.so.1",
                   NVIDIA)
    assert ran.rc == 0, ran.err
    nodes = [ln for ln in ran.out.splitlines() if ln.startswith("nvidia")]
    assert nodes == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert "dlopen libcuda.so.1 ok" in ran.out and "\n0\n" not in ran.out  # the linker cache lists it
    assert ran.served == GPU_PATH[site.product.flavour] | PROCFS[site.product.flavour]


def test_amd_gpu(site: Site) -> None:
    ran = site.run("ls /dev/dri; ls /dev | grep kfd; id -G", AMD)
    assert ran.rc == 0, ran.err
    lines = ran.out.split()
    assert [x for x in lines if x.startswith(("renderD", "card"))] == ["card2", "renderD129"]
    assert "kfd" in lines
    assert ran.served == GPU_PATH[site.product.flavour]  # no procfs copy


def test_host_rocm_in_the_linker_cache(site: Site) -> None:
    """Issue 31: host ROCm's directory mounts are in the linker cache the shim writes, on every flavour."""
    ran = site.run("grep -c libamdhip64.so.6 /etc/ld.so.cache; ls /opt/rocm/lib",
                   {**AMD, "gpuhook.dev/host-rocm": "true"})
    assert ran.rc == 0, ran.err
    assert ran.out.splitlines()[0] == "1" and "libamdhip64.so.6" in ran.out
    assert ran.served == GPU_PATH[site.product.flavour]


def test_refusal(site: Site) -> None:
    ran = site.run("true", {"gpuhook.dev/gpus": "7", "gpuhook.dev/vendor": "nvidia"})
    assert ran.rc != 0
    said = [ln for ln in ran.err.splitlines() if ln.strip()]
    assert len(said) == 1 and "no NVIDIA GPU 7" in said[0], ran.err
    assert ran.spec_after == ran.spec_before
    assert ran.served == GPU_PATH[site.product.flavour]


def test_clocks_applied_and_restored(site: Site) -> None:
    log = Path(site.host, "var/lib/gpuhook-sim/nvml.log")
    start = log.read_text() if log.exists() else ""
    ran = site.run("cat /proc/driver/nvidia/gpus/*/information | grep -c Model",
                   {**NVIDIA, "gpuhook.dev/clocks": "1500"})
    assert ran.rc == 0, ran.err
    assert ran.out.split() == ["1"]  # the procfs copy shows its one GPU
    calls = log.read_text()[len(start):].split("\n")
    assert [c.split()[0] for c in calls if c] == ["set-clocks", "reset-clocks"]
    assert ran.served == GPU_PATH[site.product.flavour] | PROCFS[site.product.flavour] | HOOKS[site.product.flavour]


def test_hook_mode_as_podman_runs_it(site: Site) -> None:
    """The hooks.d entry `gpuhook configure podman` writes, run by plain runc."""
    hooks = site.tmp / "hooks.json"
    subprocess.run(site.product.argv("gpuhook", "configure", "podman", "--config-path", str(hooks)),
                   env=site.product.env(site.config), capture_output=True, check=True)
    hook = json.loads(hooks.read_text())["hook"]

    def add(spec: dict[str, Any]) -> None:
        env = [*hook.get("env", []), f"GPUHOOK_CONFIG={site.config}", f"GPUHOOK_WARM_SOCKET={site.product.sock}"]
        spec["hooks"] = {"prestart": [{"path": hook["path"], "args": hook["args"], "env": env}]}

    ran = site.run("ls /dev | grep nvidia", NVIDIA, hook_mode=True, edit=add)
    assert ran.rc == 0, ran.err
    assert ran.out.split() == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert ran.served == HOOKS[site.product.flavour]


def test_docker_gpus_hook(site: Site) -> None:
    """What dockerd 20.10 writes for `--gpus device=1` (its prestart hook and NVIDIA_VISIBLE_DEVICES), run by plain
    runc: the executable install.sh linked for it serves, the native way where built (through the warm helper when
    it runs)."""
    def add(spec: dict[str, Any]) -> None:
        # dockerd gives the hook no environment: on a host it finds /etc/gpuhook's config and /run/gpuhook's helper,
        # here the flavour's own
        spec["hooks"] = {"prestart": [{"path": site.product.cmd("nvidia-container-runtime-hook"),
                                       "args": ["nvidia-container-runtime-hook", "prestart"],
                                       "env": [f"GPUHOOK_CONFIG={site.config}",
                                               f"GPUHOOK_WARM_SOCKET={site.product.sock}"]}]}

    ran = site.run("ls /dev | grep nvidia", env={"NVIDIA_VISIBLE_DEVICES": "1"}, hook_mode=True, edit=add)
    assert ran.rc == 0, ran.err
    assert ran.out.split() == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert ran.served == GPUS_HOOK[site.product.flavour]


def test_doctor_names_the_paths(site: Site) -> None:
    out = subprocess.run(site.product.argv("gpuhook", "doctor"), env=site.product.env(site.config),
                         capture_output=True, text=True, check=False).stdout
    native = [ln for ln in out.splitlines() if ("native front end" in ln or "no native" in ln) and "paths:" not in ln]
    (paths,) = [ln for ln in out.splitlines() if "paths:" in ln]
    if site.product.flavour == "python":
        assert len(native) == 3 and all(ln.startswith("warn") for ln in native), out
        assert "every container starts Python" in paths
    else:
        assert len(native) == 1 and native[0].startswith("ok") and "built from this installation's sources" in out
        assert ("served by the warm helper" in paths) == site.product.flavour.endswith("warm"), paths
