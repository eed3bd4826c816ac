"""What each Docker generation gives gpuhook's users, through the real daemons: Debian's Docker 20.10, and Docker 28
(github.com/docker/docker v28.5.2) and 29 (github.com/moby/moby/v2 v2.0.0-beta.24, Docker 29.8.1) built from their
module sets by tools/components/build.sh (with the docker CLI 29.10 and containerd 2.4.2, which dockerd starts from
its PATH). Each test runs on every generation and asserts what the container sees (its /dev, the simulated
nvidia-smi, its env, the simulated GPU's clocks) where the generation supports the way in, and the refusal where it
does not: docs/engines.md's table "What each Docker generation supports" names these tests.

Each generation runs up to three private daemons (tests/support/docker_engine.py), registered by the real
`gpuhook configure docker [--cdi]` with `cdi-spec-dirs` on a directory where the real `gpuhook cdi generate` wrote
its specs: "hook" (gpuhook's nvidia-container-runtime-hook on dockerd's PATH, the specs of a mixed 2 NVIDIA + 2 AMD
host), "cdi-nvidia" (no runtime hook; an nvidia-cdi-hook on PATH, which is what makes Docker 29 resolve --gpus through
CDI for NVIDIA: a stand-in that fails if run, since gpuhook's specs never run it; an NVIDIA host's specs) and
"cdi-amd" (neither: Docker 29 resolves --gpus through the amd.com specs; an AMD host's). A cold build of Docker 28 or
29 takes 2-5 minutes on two cores, once per machine (tools/components' cache)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from gpuhook.cli import doctor_engines
from gpuhook.request.requirements import version_tuple
from gpuhook.testing.simulate import HostSpec, build_host
from tests.support import docker_engine
from tests.support.docker_engine import IMAGE, Engine

from . import conftest

GENERATIONS = ["20.10", "28", "29"]
RELEASE = {"20.10": "20.10.24", "28": "28.5.2", "29": "29.8.1"}  # what each dockerd --version says
SEES_NVIDIA = ("ls /dev | grep nvidia; nvidia-smi; dlopen-probe libcuda.so.1; "
               "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES")
SEES_AMD = "ls /dev/dri; ls /dev/kfd; echo AMD_VISIBLE_DEVICES=$AMD_VISIBLE_DEVICES"
Engines = Callable[[str, str], Engine]


def _generation(generation: str) -> str:
    why = docker_engine.available(generation)
    if why:
        pytest.skip(why)
    return generation


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, mixed_host: str) -> dict[str, str]:
    work = tmp_path_factory.mktemp("docker-hosts")
    return {"nvidia": build_host(str(work / "nvidia"), HostSpec(nvidia=2)),
            "amd": build_host(str(work / "amd"), HostSpec(amd=2)), "mixed": mixed_host}


def gpuhook_config(work: Path, host: str) -> Path:
    """gpuhook's config for a daemon's containers: `host` as the host, state and log under `work`. Writes it (a new
    file: the shim's config cache sees the change at once)."""
    config = work / "gpuhook.toml"
    tmp = config.with_suffix(".new")
    tmp.write_text(f'host_root = "{host}"\nstate_dir = "{work}/state"\nlog_file = "{work}/gpuhook.log"\n')
    tmp.replace(config)
    return config


def gpuhook(argv: list[str], config: Path, build: docker_engine.Build) -> subprocess.CompletedProcess[str]:
    """The real gpuhook ARGV with `build`'s dockerd installed (what configure and cdi generate ask its --version)."""
    return subprocess.run([*docker_engine.as_installed(build), conftest.GPUHOOK, *argv],
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}, capture_output=True,
                          text=True, timeout=60, check=False)


VARIANTS = {"hook": "mixed", "cdi-nvidia": "nvidia", "cdi-amd": "amd"}  # variant -> the host its specs describe


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory, hosts: dict[str, str], base_rootfs: str) -> Iterator[Engines]:
    """get(generation, variant) -> that daemon, started on first use and kept for the module."""
    builds: dict[str, docker_engine.Build] = {}
    running: dict[tuple[str, str], Engine] = {}
    with ExitStack() as stack:
        def get(generation: str, variant: str) -> Engine:
            if (generation, variant) in running:
                return running[generation, variant]
            build = builds.get(generation) or builds.setdefault(generation, docker_engine.build(generation))
            work = tmp_path_factory.mktemp(f"docker-{generation}-{variant}")
            host = hosts[VARIANTS[variant]]
            config = gpuhook_config(work, host)
            cdi = work / "cdi"
            cdi.mkdir()
            daemon_json = work / "daemon.json"
            reads_cdi = generation != "20.10"
            if reads_cdi:  # 20.10 refuses a daemon.json key it does not know
                # Docker 29.8 gives containers a time namespace, which Debian 12's runc 1.1 does not know ("namespace
                # {"time" ""} does not exist"; runc 1.2 does): Docker's own switch keeps the host's
                features = {"time-namespaces": False} if generation == "29" else {}
                daemon_json.write_text(json.dumps({"cdi-spec-dirs": [str(cdi)], "features": features}))
            r = gpuhook(["configure", "docker", "--config-path", str(daemon_json), "--runtime-path", conftest.SHIM,
                         *(["--cdi"] if reads_cdi else [])], config, build)
            assert r.returncode == 0, r.stderr
            r = gpuhook(["cdi", "generate", "--output-dir", str(cdi)], config, build)  # as an admin runs it
            assert r.returncode == 0, r.stderr
            reads = "reads cdiVersion up to" if reads_cdi else "reads no CDI specs"
            assert f"Docker {RELEASE[generation]} {reads}" in r.stdout + r.stderr  # the installed one, found
            helpers = work / "helpers"
            helpers.mkdir()
            if variant == "hook":  # Docker's --gpus finds it on dockerd's PATH (install.sh links gpuhook's there)
                launcher = Path(conftest.GPUHOOK).parent / "nvidia-container-runtime-hook"
                _script(helpers / "nvidia-container-runtime-hook", f'GPUHOOK_CONFIG={config} exec {launcher} "$@"')
            if variant == "cdi-nvidia":  # NVIDIA's toolkit installs it; Docker 29 only looks it up
                _script(helpers / "nvidia-cdi-hook", 'echo "stand-in nvidia-cdi-hook: not to be run" >&2; exit 1')
            engine = stack.enter_context(docker_engine.start(
                work, build, daemon_json, base_rootfs, (str(helpers),), {"GPUHOOK_CONFIG": str(config)}))
            running[generation, variant] = engine
            return engine

        yield get


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _uuid(host: str, index: int) -> str:
    info = Path(host, "proc/driver/nvidia/gpus")
    uuids = sorted((bdf, next(line.split()[-1] for line in (info / bdf / "information").read_text().splitlines()
                               if line.startswith("GPU UUID"))) for bdf in os.listdir(info))
    return uuids[index][1]


def _nodes(out: str, prefix: str) -> list[str]:
    return [w for w in out.split() if w.startswith(prefix)]


# --gpus, every form, with gpuhook as the runtime: dockerd's NVIDIA driver adds NVIDIA_VISIBLE_DEVICES (and on 20.10
# and 28, or 29 without nvidia-cdi-hook, the prestart hook, which the shim drops); gpuhook gives exactly those GPUs
GPUS_FORMS = [
    ("all", ["nvidia0", "nvidia1"], True),
    ("1", ["nvidia0"], True),
    ('"device=0,1"', ["nvidia0", "nvidia1"], True),
    ("device=GPU-1", ["nvidia1"], True),  # GPU 1's UUID
    ('"device=0","capabilities=utility"', ["nvidia0"], False),  # NVML and nvidia-smi, no CUDA driver
]


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize(("gpus", "gpu_nodes", "cuda"), GPUS_FORMS, ids=["all", "count", "devices", "uuid", "caps"])
def test_gpus_flag_through_the_shim(engines: Engines, hosts: dict[str, str], generation: str, gpus: str,
                                    gpu_nodes: list[str], cuda: bool) -> None:
    engine = engines(_generation(generation), "hook")
    gpuhook_config(engine.work, hosts["nvidia"])
    gpus = gpus.replace("GPU-1", _uuid(hosts["nvidia"], 1))
    r = engine.run("--gpus", gpus, IMAGE, "sh", "-c", SEES_NVIDIA + " 2>&1; true")
    assert r.returncode == 0, r.stderr
    assert [n for n in _nodes(r.stdout, "nvidia") if n[6:].isdigit()] == gpu_nodes
    assert {"nvidiactl", "nvidia-uvm"} <= set(r.stdout.split())
    assert f"GPUs: {len(gpu_nodes)}" in r.stdout
    assert ("dlopen libcuda.so.1 ok" in r.stdout) == cuda


@pytest.mark.parametrize("generation", GENERATIONS)
def test_gpus_flag_hook_mode_under_plain_runc(engines: Engines, hosts: dict[str, str], generation: str) -> None:
    """No --runtime: the prestart hook dockerd adds for --gpus (gpuhook's nvidia-container-runtime-hook) injects."""
    engine = engines(_generation(generation), "hook")
    gpuhook_config(engine.work, hosts["nvidia"])
    r = engine.run("--gpus", "device=1", IMAGE, "sh", "-c", SEES_NVIDIA, runtime=None)
    assert r.returncode == 0, r.stderr
    assert _nodes(r.stdout, "nvidia")[:4] == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert "GPUs: 1" in r.stdout and "dlopen libcuda.so.1 ok" in r.stdout


# --gpus resolved by dockerd itself into CDI devices of gpuhook's specs (Docker 29: nvidia.com/gpu=ID where
# nvidia-cdi-hook is on its PATH, amd.com/gpu=ID where no NVIDIA helper is and the specs hold amd.com); no gpuhook
# runtime, no hook: what the container gets is the spec's
CDI_GPUS = [
    ("cdi-nvidia", "device=1", ["nvidia1"]),
    ("cdi-nvidia", "2", ["nvidia0", "nvidia1"]),
    ("cdi-amd", "all", ["card1", "card2", "renderD128", "renderD129", "/dev/kfd"]),
    ("cdi-amd", "device=1", ["card2", "renderD129", "/dev/kfd"]),
]


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize(("variant", "gpus", "seen"), CDI_GPUS, ids=["nvidia-device", "nvidia-count", "amd-all",
                                                                      "amd-device"])
def test_gpus_flag_through_cdi(engines: Engines, generation: str, variant: str, gpus: str, seen: list[str]) -> None:
    engine = engines(_generation(generation), variant)
    nvidia = variant == "cdi-nvidia"
    r = engine.run("--gpus", gpus, IMAGE, "sh", "-c", (SEES_NVIDIA if nvidia else SEES_AMD) + " 2>&1; true",
                   runtime=None)
    if generation != "29":  # their --gpus needs nvidia-container-runtime-hook (or AMD's runtime): none here
        assert r.returncode != 0 and "could not select device driver" in r.stderr, r.stdout + r.stderr
        return
    assert r.returncode == 0, r.stderr
    if nvidia:
        assert [n for n in _nodes(r.stdout, "nvidia") if n[6:].isdigit()] == seen
        assert f"GPUs: {len(seen)}" in r.stdout and "dlopen libcuda.so.1 ok" in r.stdout
        assert "NVIDIA_VISIBLE_DEVICES=void" in r.stdout  # the spec's marker: gpuhook's spec, not the hook
    else:
        assert [w for w in r.stdout.split() if not w.startswith("AMD_")] == seen
        assert "AMD_VISIBLE_DEVICES=void" in r.stdout


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize(("device", "seen"), [
    ("nvidia.com/gpu=0", ["nvidia0"]),
    ("amd.com/gpu=1", ["card2", "renderD129", "/dev/kfd"]),
], ids=["nvidia", "amd"])
def test_device_flag_names_a_cdi_device(engines: Engines, generation: str, device: str, seen: list[str]) -> None:
    """`--device vendor.com/gpu=N` from gpuhook's specs of the mixed host, plain runc: the spec's nodes, mounts and
    env; Docker 20.10 takes it for a host path."""
    engine = engines(_generation(generation), "hook")
    nvidia = device.startswith("nvidia")
    r = engine.run("--device", device, IMAGE, "sh", "-c", (SEES_NVIDIA if nvidia else SEES_AMD) + " 2>&1; true",
                   runtime=None)
    if generation == "20.10":
        assert r.returncode != 0 and device in r.stderr, r.stdout + r.stderr
        return
    assert r.returncode == 0, r.stderr
    if nvidia:
        assert [n for n in _nodes(r.stdout, "nvidia") if n[6:].isdigit()] == seen
        assert "GPUs: 1" in r.stdout and "dlopen libcuda.so.1 ok" in r.stdout
    else:
        assert [w for w in r.stdout.split() if not w.startswith("AMD_")] == seen


def _clocks(host: str, index: int) -> tuple[int, int]:
    """The simulated GPU's locked clocks (min, max; 0 0: not locked), from the stub NVML's state."""
    state = Path(host, "var/lib/gpuhook-sim/nvml")
    for line in state.read_text().splitlines() if state.exists() else []:
        i, lo, hi, *_ = line.split()
        if int(i) == index:
            return int(lo), int(hi)
    return 0, 0


@pytest.mark.parametrize("generation", GENERATIONS)
def test_annotation_reaches_the_runtime(engines: Engines, hosts: dict[str, str], generation: str) -> None:
    """`--annotation gpuhook.dev/clocks=1500` (API 1.43): GPU 1's clocks locked while the container runs, unlocked
    when it goes; a bad value is gpuhook's one line; Docker 20.10's CLI has no --annotation."""
    engine = engines(_generation(generation), "hook")
    host = hosts["nvidia"]
    gpuhook_config(engine.work, host)
    assert _clocks(host, 1) == (0, 0)
    r = engine.cli("run", "-d", "--network", "none", "--runtime", "gpuhook", "--gpus", "device=1",
                   "--annotation", "gpuhook.dev/clocks=1500", IMAGE, "sleep", "60")
    if generation == "20.10":
        assert r.returncode != 0 and "unknown flag: --annotation" in r.stderr
        assert _clocks(host, 1) == (0, 0)
        return
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    try:
        assert _clocks(host, 1) == (1500, 1500) and _clocks(host, 0) == (0, 0)
    finally:
        assert engine.cli("rm", "-f", cid).returncode == 0
    for _ in range(100):  # poststop runs as the container is removed
        if _clocks(host, 1) == (0, 0):
            break
        time.sleep(0.1)
    assert _clocks(host, 1) == (0, 0)
    bad = engine.run("--gpus", "device=1", "--annotation", "gpuhook.dev/clocks=fast", IMAGE, "true")
    assert bad.returncode != 0 and "gpuhook.dev/clocks='fast'" in bad.stderr, bad.stderr
    assert _clocks(host, 1) == (0, 0)


COMPOSE = """services:
  cuda:
    image: gpuhook-test:latest
    network_mode: none
    runtime: gpuhook
    command: ["sh", "-c", "echo SEES $$(ls /dev | grep '^nvidia[0-9]')"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["1"]
              capabilities: [gpu]
"""


@pytest.mark.skipif(shutil.which("docker-compose") is None and not os.environ.get("CI"),
                    reason="docker-compose not installed (tests/debian-packages.txt)")
@pytest.mark.parametrize("generation", GENERATIONS)
def test_compose_gpu_reservation(engines: Engines, hosts: dict[str, str], generation: str, tmp_path: Path) -> None:
    """Debian's docker-compose 1.29 against the daemon: a GPU reservation (device_ids ["1"]) with the gpuhook
    runtime; the service sees GPU 1."""
    engine = engines(_generation(generation), "hook")
    gpuhook_config(engine.work, hosts["nvidia"])
    (tmp_path / "compose.yml").write_text(COMPOSE)
    env = {**os.environ, "DOCKER_HOST": engine.sock}

    def compose(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker-compose", "-p", "ghmodern", "-f", str(tmp_path / "compose.yml"), *args],
                              env=env, capture_output=True, text=True, timeout=180, check=False)

    try:
        up = compose("up", "--no-color")
        assert up.returncode == 0, up.stdout + up.stderr
        assert [line.split("SEES", 1)[1].split() for line in up.stdout.splitlines() if "SEES" in line] == [["nvidia1"]]
    finally:
        assert compose("down").returncode == 0


@pytest.mark.parametrize("generation", GENERATIONS)
def test_configure_cdi(engines: Engines, generation: str, tmp_path: Path) -> None:
    """`gpuhook configure docker --cdi` with that generation's dockerd installed: features.cdi on 28 and 29 (whose
    daemon, so configured, lists the specs' devices), refused on 20.10 with the file untouched."""
    build = docker_engine.build(_generation(generation))
    daemon_json = tmp_path / "daemon.json"
    before = '{"log-level": "warn"}\n'
    daemon_json.write_text(before)
    r = gpuhook(["configure", "docker", "--cdi", "--config-path", str(daemon_json), "--runtime-path", conftest.SHIM],
                gpuhook_config(tmp_path, "/"), build)
    if generation == "20.10":
        assert r.returncode != 0 and f"--cdi: Docker {RELEASE[generation]} reads no CDI specs" in r.stderr, r.stderr
        assert daemon_json.read_text() == before
        return
    assert r.returncode == 0, r.stderr
    written = json.loads(daemon_json.read_text())
    assert written["features"]["cdi"] is True and written["log-level"] == "warn"
    engine = engines(generation, "hook")  # configured the same way (and given cdi-spec-dirs)
    info = engine.cli("info", "--format", "{{json .}}")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["CDISpecDirs"] == [str(engine.work / "cdi")]
    assert "gpuhook" in data["Runtimes"]
    if generation == "29":  # 29 lists what it discovered (API 1.50)
        names = {d["ID"] for d in data.get("DiscoveredDevices") or [] if d.get("Source") == "cdi"}
        assert {"nvidia.com/gpu=0", "nvidia.com/gpu=all", "amd.com/gpu=1"} <= names


DOCTOR_GPUS = {  # (generation, variant) -> doctor's --gpus finding; {bindir}: the doctor's PATH
    ("28", "hook"): ("ok", "docker --gpus: dockerd runs {bindir}/nvidia-container-runtime-hook, gpuhook's"),
    ("29", "hook"): ("ok", "docker --gpus: dockerd runs {bindir}/nvidia-container-runtime-hook, gpuhook's"),
    ("28", "cdi-nvidia"): ("warn", "docker --gpus: no nvidia-container-runtime-hook on dockerd's PATH ({bindir}): "
                           "`docker run --gpus` fails with 'could not select device driver'"),
    ("29", "cdi-nvidia"): ("ok", "docker --gpus: dockerd 29.8.1 finds nvidia-cdi-hook: --gpus takes CDI devices "
                           "nvidia.com/gpu=ID from the specs in its cdi-spec-dirs (gpuhook's: gpuhook cdi generate)"),
    ("29", "cdi-amd"): ("warn", "docker --gpus: no nvidia-container-runtime-hook or nvidia-cdi-hook on dockerd's PATH "
                        "({bindir}): dockerd 29.8.1 takes --gpus as amd.com/gpu CDI devices where the specs hold only "
                        "AMD GPUs, else fails with 'could not select device driver'"),
}


@pytest.mark.parametrize(("generation", "variant"), list(DOCTOR_GPUS), ids=["-".join(k) for k in DOCTOR_GPUS])
def test_doctor_names_the_release_its_cdi_and_the_gpus_path(engines: Engines, generation: str, variant: str) -> None:
    """doctor (cli/doctor_engines.py) of the daemon's own daemon.json, with its dockerd and --gpus helpers on the
    PATH doctor searches: its release, that it reads CDI (the library its module set vendors), the ways in, and
    where --gpus goes (the runtime hook, or on 29 CDI)."""
    engine = engines(_generation(generation), variant)
    bindir = engine.work / "doctor-bin"
    bindir.mkdir(exist_ok=True)
    links = {"dockerd": engine.build.dockerd, **{p.name: str(p) for p in (engine.work / "helpers").iterdir()}}
    if "nvidia-container-runtime-hook" in links:  # gpuhook's launcher itself, as install.sh links it
        links["nvidia-container-runtime-hook"] = str(Path(conftest.GPUHOOK).parent / "nvidia-container-runtime-hook")
    for name, target in links.items():
        if not (bindir / name).exists():
            (bindir / name).symlink_to(target)
    found = doctor_engines.checks({"docker": str(engine.work / "daemon.json")}, proc=str(engine.work / "no-proc"),
                                  search=str(bindir), cdi_specs=True)
    release = RELEASE[generation]
    library = {"28": "1.0.1", "29": "1.1.1"}[generation]
    ways = "the shim (docker run --runtime gpuhook)" + (" or the hook (--gpus runs nvidia-container-runtime-hook)"
                                                         if variant == "hook" else "")
    assert found[0] == ("ok", f"docker {release}: reads CDI specs (container-device-interface {library}); GPU "
                        f"containers take {ways} or CDI (gpuhook's specs); gpuhook registered in place in "
                        f"{engine.work / 'daemon.json'}")
    level, what = DOCTOR_GPUS[generation, variant]
    assert found[1][:2] == (level, what.format(bindir=bindir))
    if generation == "29" and variant == "hook":  # time namespaces (29.5) and this host's runc, as doctor runs it
        runc = subprocess.run(["runc", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
        older = version_tuple(runc.split()[2].split("+")[0])[:2] < (1, 2)
        said = doctor_engines.time_namespaces(runc, search=str(bindir), config=str(engine.work / "daemon.json"))
        assert [f[0] for f in said] == (["ok"] if older else []), said  # this daemon.json turns them off
        on = engine.work / "daemon-time-namespaces.json"
        on.write_text(json.dumps({k: v for k, v in json.loads((engine.work / "daemon.json").read_text()).items()
                                  if k != "features"}))
        said = doctor_engines.time_namespaces(runc, search=str(bindir), config=str(on))
        assert [f[0] for f in said] == (["fail"] if older else []), said
        if older:
            assert f"docker {release} gives every container a time namespace" in said[0][1]
