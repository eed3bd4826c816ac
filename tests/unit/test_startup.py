"""What the hot paths load: start-up cost is a feature, its rules written once in gpuhook.startup.

Every module a GPU container's start imports is paid for on every such start, so these tests pin the set:
the standard library's heavier packages (json, re, enum, typing, ...) and gpuhook's optional ones stay out.
They run the real shim under `python -I -S`, as its launcher does, and stop it where it would exec runc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gpuhook.startup import HEAVY
from gpuhook.testing.bundle import oci_config

from ..conftest import FakeHost

PATH = [str(Path(__file__).resolve().parents[2] / "hook"), sysconfig.get_paths()["purelib"]]
PACKAGE = Path(__file__).resolve().parents[2] / "hook" / "gpuhook"

# the shim as its launcher starts it, but execv reports the loaded modules instead of starting the runtime
_PROBE = """
import os, sys
sys.path[:0] = {path!r}
def report(path, argv):
    sys.stdout.write(" ".join(sorted(sys.modules)) + "\\n")
    sys.stdout.flush()
    os._exit(0)
os.execv = report
sys.argv = ["gpuhook-runtime", "create", "--bundle", {bundle!r}, "startup-test"]
from gpuhook.cli.shim import main
main()
"""


def _loaded(host: str, tmp_path: Path, annotations: dict[str, str] | None = None,
            env: dict[str, str] | None = None) -> set[str]:
    bundle = tmp_path / "bundle"
    (bundle / "rootfs" / "dev").mkdir(parents=True, exist_ok=True)
    (bundle / "config.json").write_text(json.dumps(oci_config(["true"], env=env, annotations=annotations)))
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nruntime = "/bin/true"\nstate_dir = "{tmp_path / "state"}"\n')
    probe = _PROBE.format(path=PATH, bundle=str(bundle))
    runs = []
    for _ in range(2):  # the first run parses and validates the config (tomllib, jsonschema) and caches it
        done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=False,
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
        assert done.returncode == 0, done.stderr
        runs.append(set(done.stdout.split()))
    assert "gpuhook.cli.shim" in runs[1]
    return runs[1]


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_pass_through_loads_no_gpu_code(fake_host: FakeHost, tmp_path: Path) -> None:
    loaded = _loaded(fake_host(nvidia=1), tmp_path)
    assert _heavy(loaded) == []
    assert "gpuhook.gpu_path.inject" not in loaded


@pytest.mark.parametrize(("annotations", "env", "amd", "needed"), [
    ({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}, None, 2, []),
    ({"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": "amd"}, None, 2, []),
    (None, {"NVIDIA_VISIBLE_DEVICES": "all", "AMD_VISIBLE_DEVICES": "0"}, 2, []),
    # a stated CUDA requirement asks the host's libcuda for its version: ctypes, and nothing else
    ({"gpuhook.dev/gpus": "all"}, {"CUDA_VERSION": "12.2.0"}, 0, ["ctypes", "ctypes._endian"]),
], ids=["nvidia-one", "amd-all", "env-both", "nvidia-cuda-check"])
def test_gpu_path_loads_nothing_heavy(fake_host: FakeHost, tmp_path: Path, annotations: dict[str, str] | None,
                                      env: dict[str, str] | None, amd: int, needed: list[str]) -> None:
    loaded = _loaded(fake_host(nvidia=2, amd=amd), tmp_path, annotations, env)
    assert "gpuhook.gpu_path.inject" in loaded  # it did take the GPU path
    assert _heavy(loaded) == needed


def test_poststop_hook_without_tuning_loads_nothing_heavy(tmp_path: Path) -> None:
    """runc runs `gpuhook hook poststop` after every hooked container stops: no argparse, no GPU path."""
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    probe = (f"import sys\nsys.path[:0] = {PATH!r}\nfrom gpuhook.cli.admin import main\n"
             "code = main(['hook', 'poststop'])\nprint(code, ' '.join(sorted(sys.modules)))\n")
    state = json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "stopped", "bundle": str(tmp_path)})
    runs = [subprocess.run([sys.executable, "-I", "-S", "-c", probe], input=state, capture_output=True, text=True,
                           check=False, env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
            for _ in range(2)]
    code, *loaded = runs[1].stdout.split()
    assert code == "0", runs[1].stderr
    assert "gpuhook.cli.hook" in loaded
    assert _heavy(set(loaded)) == [] and "argparse" not in loaded and "gpuhook.gpu_path.inject" not in loaded


def test_running_a_program_loads_no_subprocess_module() -> None:
    """Hook mode and CDI's update-ldcache run ldconfig while runc waits: subprocess alone costs 12-25 ms."""
    probe = (f"import sys\nsys.path[:0] = {PATH!r}\nfrom gpuhook import proc\nfrom gpuhook.apply import live\n"
             "proc.run(['true'])\nprint(' '.join(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert _heavy(loaded) == ["ctypes", "ctypes._endian"]  # live's syscalls need ctypes; nothing else heavy
    assert not loaded & {"signal", "threading", "selectors"}


def test_every_room_init_is_empty_and_the_package_holds_only_its_version() -> None:
    """An import of any module first runs every __init__.py above it: they must cost nothing."""
    rooms = sorted(p for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    assert {p.parent.name for p in rooms} >= {"request", "host", "vendors", "plan", "apply", "tuning", "engines",
                                              "cli", "testing"}
    assert [p for p in rooms if p.read_text().strip()] == []
    top = [line for line in (PACKAGE / "__init__.py").read_text().splitlines() if line and not line.startswith('"')]
    assert top == ['__version__ = "0.1.0"']


def test_docker_gpus_hook_behind_the_shim_loads_nothing_heavy(tmp_path: Path) -> None:
    """Docker's --gpus runs nvidia-container-runtime-hook at every such container's start: where gpuhook's shim
    already prepared the container (its record is there) the hook only looks, with no argparse and no GPU path."""
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    probe = (f"import os, sys\nsys.path[:0] = {PATH!r}\nfrom gpuhook.apply import containers\n"
             "from gpuhook.host.processes import start_time\n"
             f"containers.save({str(tmp_path / 'state')!r}, containers.ContainerRecord(id='c1', drivers=(), "
             "runtime_root='/run/runc', creator=os.getpid(), creator_start=start_time(os.getpid())))\n"
             "from gpuhook.cli.nvidia_hook import main\n"
             "code = main(['prestart'])\nprint(code, ' '.join(sorted(sys.modules)))\n")
    state = json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 1, "bundle": str(tmp_path)})
    runs = [subprocess.run([sys.executable, "-I", "-S", "-c", probe], input=state, capture_output=True, text=True,
                           check=False, env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
            for _ in range(2)]
    code, *loaded = runs[1].stdout.split()
    assert code == "0", runs[1].stderr
    assert "gpuhook.cli.nvidia_hook" in loaded and "gpuhook.cli.hook" in loaded
    assert _heavy(set(loaded)) == [] and "argparse" not in loaded and "gpuhook.gpu_path.inject" not in loaded


def test_tuning_loads_neither_pynvml_nor_amdsmi(fake_host: FakeHost, tmp_path: Path) -> None:
    """The prestart and poststop hooks tune through ctypes (host/nvml_lib.py, host/amd_smi_lib.py): the vendors'
    Python packages cost 20-40 ms to import, once per hook process on the direct path. Sets and restores one
    setting of each vendor through the stub libraries, and reads the stubs' state back to be sure they were
    the ones called."""
    host = fake_host(nvidia=1, amd=1)
    probe = f"""
import os, sys
sys.path[:0] = {PATH!r}
from gpuhook.host.root import Root
from gpuhook.tuning import session
from gpuhook.tuning.backends import BackendSet
from gpuhook.vendors.contract import Setting
from gpuhook.vendors.discover import discover
inv = discover(Root({host!r}))
nv, amd = inv.vendor("nvidia").gpus[0], inv.vendor("amd").gpus[0]
me = session.Holder("c1", os.getpid(), "1")
with BackendSet(Root({host!r}), {str(tmp_path)!r}) as b:
    asked = [Setting(vendor="nvidia", gpu=nv.uuid, index=0, pci=nv.pci, device=nv.uuid, name="power_limit",
                     value="250000"),
             Setting(vendor="amd", gpu=amd.uuid, index=0, pci=amd.pci, device=amd.sysfs, name="power_cap",
                     value="250000000")]
    session.acquire({str(tmp_path)!r}, me, asked, [], b)
    print(open({host!r} + "/var/lib/gpuhook-sim/amdsmi").read().split()[2])
    session.release({str(tmp_path)!r}, "c1", b)
print(" ".join(sorted(sys.modules)))
"""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    cap, loaded = done.stdout.splitlines()
    assert cap == "250000000"  # libamd_smi was called, not the sysfs files
    assert Path(f"{host}/var/lib/gpuhook-sim/amdsmi").read_text().split()[2] == "300000000"  # and restored
    assert Path(f"{host}/var/lib/gpuhook-sim/nvml.log").read_text().split()[:2] == ["set-power", "0"]
    assert not set(loaded.split()) & {"pynvml", "amdsmi", "subprocess", "typing", "enum", "re", "pathlib"}
