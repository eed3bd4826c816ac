"""NVIDIA's own runtime (nvidia-container-runtime v1.20 in CDI mode, built from the pinned module by
tools/components) in front of runc, on gpuhook's CDI spec of a simulated host and, beside it, on the spec NVIDIA's
nvidia-ctk writes of the same host: what an admin gets who keeps NVIDIA's runtime and lets gpuhook write the specs.
The container is asked for by a CDI annotation, as Kubernetes' device plugins ask; it must see the same GPU nodes
either way, and its linker cache (written by the spec's createContainer hook: gpuhook-createhook under gpuhook's
spec, NVIDIA's nvidia-cdi-hook under its own) must name at least the compute and utility libraries NVIDIA's does."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from gpuhook.host import ldcache
from gpuhook.testing.bundle import make_bundle, oci_config
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.nvidia.files import LIBRARIES
from tests.e2e import conftest
from tests.support import nvidia_ctk

from .node import components

SHOW = "ls /dev | grep -E '^nvidia[0-9]+$' | tr '\\n' ' '"


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"gpuhook": XDG config dir selecting gpuhook's spec, "nvidia": one selecting nvidia-ctk's}, of one host."""
    built = components()
    d = tmp_path_factory.mktemp("nvidia-runtime")
    host = build_host(str(d / "host"), HostSpec(nvidia=4, amd=0))
    config = d / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{d}/state"\n')
    (d / "gpuhook").mkdir()
    (d / "nvidia").mkdir()
    subprocess.run([conftest.GPUHOOK, "cdi", "generate", "--vendor", "nvidia", "--output",
                    str(d / "gpuhook" / "gpuhook-nvidia.json")],
                   env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}, check=True, capture_output=True)
    made = nvidia_ctk.own_spec(str(built / "nvidia-ctk"), str(built / "nvidia-cdi-hook"), host,
                               d / "nvidia" / "nvidia.json")
    assert made.returncode == 0, made.stderr[-3000:]
    out = {name: nvidia_ctk.cdi_mode(d / f"xdg-{name}", d / name) for name in ("gpuhook", "nvidia")}
    out["runtime"] = built / "nvidia-container-runtime"
    return out


def _run(specs: dict[str, Path], which: str, device: str, base_rootfs: str, where: Path) -> tuple[str, set[str]]:
    """What a container asking for nvidia.com/gpu=`device` sees through NVIDIA's runtime on `which` spec: its GPU
    nodes, and the SONAMEs its linker cache names afterwards. Runs a container, as engines call a runtime."""
    bundle = where / which
    make_bundle(str(bundle), oci_config(["sh", "-c", SHOW],
                                        annotations={"cdi.k8s.io/test": f"nvidia.com/gpu={device}"}), base_rootfs)
    env = {"PATH": os.environ["PATH"], "XDG_CONFIG_HOME": str(specs[which])}
    cid = f"nvrt-{which}-{device}-{os.getpid()}"
    out, err = bundle / "out", bundle / "err"
    with out.open("wb") as o, err.open("wb") as e:  # files: the container's init keeps what it inherits open
        created = subprocess.run([str(specs["runtime"]), "create", "--bundle", str(bundle), cid], env=env,
                                 stdin=subprocess.DEVNULL, stdout=o, stderr=e, check=False)
    try:
        assert created.returncode == 0, err.read_text()[-2000:]
        subprocess.run([str(specs["runtime"]), "start", cid], env=env, check=True)
        for _ in range(200):
            state = subprocess.run(["runc", "state", cid], capture_output=True, text=True, check=False).stdout
            if '"stopped"' in state:
                break
            subprocess.run(["sleep", "0.05"], check=True)
    finally:
        subprocess.run([str(specs["runtime"]), "delete", "-f", cid], env=env, capture_output=True, check=False)
    cache = bundle / "rootfs" / "etc" / "ld.so.cache"
    sonames = {soname for soname, _ in ldcache.parse(cache.read_bytes())} if cache.exists() else set()
    return out.read_text(), sonames


@pytest.mark.parametrize("device", ["2", "all"])
def test_nvidias_runtime_on_gpuhooks_spec_gives_what_it_gives_on_its_own(specs: dict[str, Path], device: str,
                                                                        base_rootfs: str, tmp_path: Path) -> None:
    seen_gpuhook, cache_gpuhook = _run(specs, "gpuhook", device, base_rootfs, tmp_path)
    seen_nvidia, cache_nvidia = _run(specs, "nvidia", device, base_rootfs, tmp_path)
    expected = "nvidia2" if device == "2" else "nvidia0 nvidia1 nvidia2 nvidia3"
    assert seen_gpuhook.split() == expected.split(), seen_gpuhook
    assert seen_nvidia.split() == seen_gpuhook.split()
    compute = {s for cap in ("utility", "compute") for s in LIBRARIES[cap]}
    wanted = {s for s in cache_nvidia if re.sub(r"\.so\..*", ".so", s) in compute and re.search(r"\.so\.\d+$", s)}
    assert "libcuda.so.1" in wanted and "libnvidia-ml.so.1" in wanted, cache_nvidia
    assert wanted <= cache_gpuhook, f"NVIDIA's spec gives {sorted(wanted - cache_gpuhook)} that gpuhook's does not"
