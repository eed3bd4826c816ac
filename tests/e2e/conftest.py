"""Real runc through gpuhook-runtime on simulated hosts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config
from gpuhook.testing.simulate import HostSpec, build_host

from ..conftest import build_in_background, require_for_tier

REPO = Path(__file__).parents[2]
HOOK_DIR = str(REPO / "hook")


@pytest.fixture(scope="session", autouse=True)
def _launchers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The shim as install.sh installs it: an isolated `python -I -S` launcher, on this checkout's source."""
    global SHIM
    from gpuhook.cli.launcher import write_launchers

    bindir = str(tmp_path_factory.mktemp("bin"))
    global GPUHOOK
    purelib = sysconfig.get_paths()["purelib"]
    launchers = write_launchers(bindir, sys.executable, [HOOK_DIR, purelib])
    SHIM, GPUHOOK = launchers["gpuhook-runtime"], launchers["gpuhook"]


SHIM = ""
GPUHOOK = ""

# cgroup v2 on this v1 host: the runtime runs in a private mount namespace with cgroup2 over /sys/fs/cgroup, where
# runc and crun put containers in v2 cgroups with their own eBPF device filter (the hook, their child, sees the same)
CGROUP2 = ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount -t cgroup2 none /sys/fs/cgroup && exec "$@"',
           "cgroup2"]
NEEDS_CRUN = pytest.mark.skipif(shutil.which("crun") is None and not os.environ.get("CI"),  # CI installs it
                                reason="crun is not installed")
RUNTIMES = ["runc", pytest.param("crun", marks=NEEDS_CRUN)]


def runtime_env(runtime: str) -> dict[str, str]:
    """What `runtime` needs in its environment here: crun < 1.14 wants to raise RLIMIT_MEMLOCK, which this sandbox
    forbids (no CAP_SYS_RESOURCE), so it gets the preload doing what crun 1.14 does (simulator/stubs/memlock.c)."""
    if os.path.basename(runtime) != "crun":
        return {}
    from gpuhook.simulator.stub_libs import build

    return {"LD_PRELOAD": build("memlock.c", "memlock.so", soname="memlock.so", libs=("-ldl",))}


_BUILT_LATE = "tests/e2e/test_docker_modern.py"  # Docker 28 and 29 from their modules: ~15 CPU-minutes cold


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The e2e tier's tools checked; the Docker generations it builds started in the background at the lowest
    priority from collection on, and their tests moved to the tier's end, so that they find them built."""
    require_for_tier(items, "e2e", ("runc", "busybox", "cc"))
    late = [i for i in items if _BUILT_LATE in str(i.fspath)]
    if not late:
        return
    rest = [i for i in items if _BUILT_LATE not in str(i.fspath)]
    last = max((n for n, i in enumerate(rest) if "tests/e2e/" in str(i.fspath)), default=len(rest) - 1)
    items[:] = [*rest[:last + 1], *late, *rest[last + 1:]]
    if not config.option.collectonly:
        build = f"bash {REPO}/tools/components/build.sh"
        build_in_background(f"{build} docker-29 && {build} docker-28", "gpuhook-docker-prebuild.log")


@pytest.fixture(scope="session")
def base_rootfs(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("image") / "rootfs")
    make_rootfs(path)
    return path


@pytest.fixture(scope="session")
def mixed_host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """2 NVIDIA + 2 AMD GPUs (AMD card nodes start at card1: card0 is a BMC)."""
    return build_host(str(tmp_path_factory.mktemp("mixed") / "host"), HostSpec(nvidia=2, amd=2))


@dataclass
class Result:
    rc: int
    out: str
    err: str
    bundle: Path
    spec_before: bytes
    cid: str

    @property
    def spec_after(self) -> bytes:
        return (self.bundle / "config.json").read_bytes()


Run = Callable[..., Result]


@pytest.fixture
def run_container(tmp_path: Path, base_rootfs: str) -> Run:
    """run_container(host_root, script, annotations=, env=, uid=, config=, spec_edit=, image_edit=, mode=, runtime=,
    cgroup2=) -> Result; mode "hook" runs `runtime` itself with gpuhook as its prestart hook, cgroup2 in CGROUP2."""

    def run(host_root: str, script: str, annotations: Mapping[str, str] | None = None,
            env: Mapping[str, str] | None = None, uid: int = 1000, config: str | None = None,
            spec_edit: Callable[[dict[str, Any]], None] | None = None, runtime: str = "runc",
            bundle_name: str | None = None, image_edit: Callable[[Path], None] | None = None,
            mode: str = "shim", cgroup2: bool = False) -> Result:
        cid = "gh-" + uuid.uuid4().hex[:12]
        bundle = tmp_path / (bundle_name or cid)
        spec = oci_config(["sh", "-c", script], env=env, annotations=annotations, uid=uid, gid=uid)
        cfg = tmp_path / f"{cid}.toml"
        if mode in ("hook", "both"):  # gpuhook as the prestart hook in config.json (with plain runc for "hook")
            spec["hooks"] = {"prestart": [{"path": GPUHOOK, "args": ["gpuhook", "hook", "prestart"],
                                           "env": [f"GPUHOOK_CONFIG={cfg}"]}]}
        if spec_edit:
            spec_edit(spec)
        make_bundle(str(bundle), spec, base_rootfs)
        if image_edit:
            image_edit(bundle / "rootfs")
        cfg.write_text(config if config is not None else
                       f'host_root = "{host_root}"\nruntime = "{runtime}"\nlog_file = "{tmp_path}/gpuhook.log"\n')
        before = (bundle / "config.json").read_bytes()
        runtime_argv = [*(CGROUP2 if cgroup2 else []), runtime if mode == "hook" else SHIM]
        proc = subprocess.run([*runtime_argv, "--log", str(tmp_path / f"{cid}.runc.json"), "--log-format", "json",
                               "run", "--bundle", str(bundle), cid],
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(cfg), **runtime_env(runtime)},
                              capture_output=True, text=True, timeout=60, check=False)
        return Result(proc.returncode, proc.stdout, proc.stderr, bundle, before, cid)

    return run


@pytest.fixture
def tuned(tmp_path: Path, base_rootfs: str):  # type: ignore[no-untyped-def]
    """make(spec=2 NVIDIA + 2 AMD, policy=""): a Tuned host (tuned.py) of the test's own; the containers it started
    are stopped after."""
    from .tuned import Tuned

    made: list[Tuned] = []

    def make(spec: HostSpec | None = None, policy: str = "") -> Tuned:
        t = Tuned(tmp_path / f"t{len(made)}", base_rootfs, spec or HostSpec(nvidia=2, amd=2), policy)
        made.append(t)
        return t

    yield make
    for t in made:
        for cid in t.started:
            t.stop(cid)


def stop_container(cid: str, tries: int = 100) -> None:
    """`runc kill -KILL`, wait for it to be stopped, `runc delete` (plain runc: config.json's poststop hooks run)."""
    import time

    subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False)
    for _ in range(tries):
        state = subprocess.run(["runc", "state", cid], capture_output=True, text=True, check=False)
        if state.returncode != 0 or '"status": "stopped"' in state.stdout:
            break
        time.sleep(0.05)
    subprocess.run(["runc", "delete", cid], capture_output=True, check=False)


def wait_ok(argv: list[str], what: str) -> None:
    """Until `argv` exits 0 (a daemon answers), for 30 s; RuntimeError naming `what` after that."""
    import time

    for _ in range(120):
        if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.25)
    raise RuntimeError(f"{what} did not come up")


def spec_of(result: Result) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(result.spec_after)
    return loaded


@pytest.fixture(scope="module")
def cri_containerd(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Any:
    """A private containerd with its CRI plugin, handlers `runc` and `gpuhook` (as `gpuhook configure containerd`
    registers it) on a simulated 2 NVIDIA + 2 AMD host; yields a tests/e2e/cri_env.CriEnv."""
    from .cri_env import start

    with start(tmp_path_factory.mktemp("cri"), base_rootfs, SHIM, GPUHOOK) as env:
        yield env
