"""`docker run --gpus` and Compose's GPU reservations through a real dockerd (Debian's docker.io) that finds
gpuhook's nvidia-container-runtime-hook on its PATH: with gpuhook-runtime as the runtime (the shim does the work,
the hook is dropped) and with plain runc (the hook injects, hook mode); NVIDIA, AMD-only and mixed simulated hosts.
One private dockerd for the module; the host it sees is switched by rewriting gpuhook's config."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec, build_host

from . import conftest

pytestmark = pytest.mark.skipif(shutil.which("dockerd") is None and not os.environ.get("CI"),
                                reason="docker.io not installed")
REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "examples/compose/docker-compose.yml"


class Docker:
    """The private dockerd: run(args) -> CompletedProcess; use(host) points gpuhook at a simulated host."""

    def __init__(self, work: Path, sock: str, hosts: dict[str, str]) -> None:
        self.work, self.sock, self.hosts = work, sock, hosts
        self.config = work / "gpuhook.toml"
        self.log = work / "gpuhook.log"

    def use(self, host: str) -> None:
        tmp = self.config.with_suffix(".new")
        tmp.write_text(f'host_root = "{self.hosts[host]}"\nstate_dir = "{self.work}/state"\n'
                       f'log_file = "{self.log}"\n')
        tmp.replace(self.config)  # a new file: the shim's config cache sees the change at once

    def run(self, *args: str, runtime: str | None = "gpuhook") -> subprocess.CompletedProcess[str]:
        cid = self.work / f"cid-{time.monotonic_ns()}"
        r = subprocess.run(["docker", "-H", self.sock, "run", "--rm", "--network", "none", "--cidfile", str(cid),
                            *(["--runtime", runtime] if runtime else []), *args],
                           capture_output=True, text=True, timeout=120, check=False)
        r.cid = cid.read_text().strip() if cid.exists() else ""  # type: ignore[attr-defined]
        return r

    def events(self, cid: str) -> list[tuple[str, str]]:
        """(component, event) of gpuhook's log lines about one container."""
        lines = [json.loads(x) for x in self.log.read_text().splitlines()] if self.log.exists() else []
        return [(x.get("component", ""), x["event"]) for x in lines if x.get("container_id") == cid]


@pytest.fixture(scope="module")
def docker(tmp_path_factory: pytest.TempPathFactory, mixed_host: str, base_rootfs: str) -> Iterator[Docker]:
    work = tmp_path_factory.mktemp("docker-gpus")
    hosts = {"nvidia": build_host(str(work / "nvidia-host"), HostSpec(nvidia=2)),
             "amd": build_host(str(work / "amd-host"), HostSpec(amd=2)), "mixed": mixed_host}
    d = Docker(work, f"unix://{work}/docker.sock", hosts)
    d.use("nvidia")
    env = {**os.environ, "GPUHOOK_CONFIG": str(d.config)}
    r = subprocess.run([conftest.GPUHOOK, "configure", "docker", "--config-path", str(work / "daemon.json"),
                        "--runtime-path", conftest.SHIM], env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    # Docker's --gpus runs nvidia-container-runtime-hook from dockerd's PATH with no environment of its own (20.10):
    # gpuhook's launcher, told where this test's config is (on a host, /etc/gpuhook/config.toml)
    hook_dir = work / "hook-bin"
    hook_dir.mkdir()
    launcher = Path(conftest.GPUHOOK).parent / "nvidia-container-runtime-hook"
    (hook_dir / "nvidia-container-runtime-hook").write_text(
        f'#!/bin/sh\nGPUHOOK_CONFIG={d.config} exec {launcher} "$@"\n')
    (hook_dir / "nvidia-container-runtime-hook").chmod(0o755)
    env["PATH"] = f"{hook_dir}:{env['PATH']}"
    logs = open(work / "dockerd.log", "w")  # noqa: SIM115 (kept open for the daemon's lifetime)
    dockerd = subprocess.Popen(["dockerd", "--config-file", str(work / "daemon.json"),
                                "--data-root", str(work / "data"), "--exec-root", str(work / "exec"),
                                "--pidfile", str(work / "docker.pid"),
                                "-H", d.sock, "--storage-driver=vfs", "--iptables=false", "--bridge=none"],
                               env=env, stdout=logs, stderr=logs)
    try:
        conftest.wait_ok(["docker", "-H", d.sock, "info"], "dockerd")
        tar = subprocess.run(["tar", "-C", base_rootfs, "-c", "."], capture_output=True, check=True).stdout
        subprocess.run(["docker", "-H", d.sock, "import", "-", "gpuhook-test:latest"], input=tar, check=True,
                       capture_output=True)
        yield d
    finally:
        subprocess.run(["docker", "-H", d.sock, "rm", "-f", *subprocess.run(
            ["docker", "-H", d.sock, "ps", "-aq"], capture_output=True, text=True, check=False).stdout.split()],
                       capture_output=True, check=False)
        dockerd.send_signal(signal.SIGTERM)
        try:
            dockerd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dockerd.kill()
        logs.close()
        subprocess.run(["umount", "-R", "-l", str(work / "exec")], capture_output=True, check=False)


SEES_NVIDIA = "ls /dev | grep nvidia; nvidia-smi; dlopen-probe libcuda.so.1"


@pytest.mark.parametrize(("gpus", "nodes"), [
    ("all", ["nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidiactl"]),
    ("1", ["nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"]),
    ('"device=1"', ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]),
], ids=["all", "count", "device"])
def test_gpus_flag_through_the_shim(docker: Docker, gpus: str, nodes: list[str]) -> None:
    docker.use("nvidia")
    r = docker.run("--gpus", gpus, "gpuhook-test:latest", "sh", "-c", SEES_NVIDIA)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:len(nodes)] == nodes
    assert f"GPUs: {len(nodes) - 3}" in r.stdout and "dlopen libcuda.so.1 ok" in r.stdout
    events = docker.events(r.cid)  # type: ignore[attr-defined]
    assert ("shim", "injecting") in events and not [e for e in events if e[0] == "hook"]  # Docker's hook dropped


def test_gpus_flag_uuid_and_capabilities(docker: Docker) -> None:
    docker.use("nvidia")
    info = Path(docker.hosts["nvidia"], "proc/driver/nvidia/gpus")
    uuids = sorted((bdf, next(line.split()[-1] for line in (info / bdf / "information").read_text().splitlines()
                               if line.startswith("GPU UUID"))) for bdf in os.listdir(info))
    r = docker.run("--gpus", f'"device={uuids[1][1]}","capabilities=utility"', "gpuhook-test:latest", "sh", "-c",
                   SEES_NVIDIA + " 2>&1; true")
    assert r.returncode == 0, r.stderr
    assert "nvidia1" in r.stdout.split() and "nvidia0" not in r.stdout.split() and "GPUs: 1" in r.stdout
    assert "dlopen libcuda.so.1 ok" not in r.stdout  # utility only: NVML and nvidia-smi, no CUDA driver


def test_gpus_all_on_an_amd_only_host_gives_the_amd_gpus(docker: Docker) -> None:
    docker.use("amd")
    r = docker.run("--gpus", "all", "--user", "1000:1000", "gpuhook-test:latest", "sh", "-c",
                   "ls /dev/dri; ls /dev/kfd; grep Groups /proc/self/status; cat /dev/kfd 2>&1; echo end")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    assert out[:5] == ["card1", "card2", "renderD128", "renderD129", "/dev/kfd"]
    assert {"44", "109"} <= set(out[6:8]) and "No such device or address" in r.stdout  # groups let the user open it


def test_gpus_flag_with_plain_runc_is_hook_mode(docker: Docker) -> None:
    docker.use("nvidia")
    r = docker.run("--gpus", "device=0", "gpuhook-test:latest", "sh", "-c", SEES_NVIDIA, runtime=None)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"]
    assert "GPUs: 1" in r.stdout and "dlopen libcuda.so.1 ok" in r.stdout
    assert ("hook", "applied live") in docker.events(r.cid)  # type: ignore[attr-defined]


def test_tuning_from_docker_20_10_by_env(docker: Docker) -> None:
    """Docker 20.10 passes no annotations: `-e GPUHOOK_CLOCKS=1500` asks for the same tuning, on the GPU the flag
    gave, applied while the container runs and restored after; a bad value is one line naming the env key. Under
    plain runc (Docker's prestart-only hook) nothing could undo it: refused, nothing applied."""
    docker.use("nvidia")
    runtime = "gpuhook"
    log = Path(docker.hosts["nvidia"], "var/lib/gpuhook-sim/nvml.log")
    before = log.read_text() if log.exists() else ""
    r = docker.run("--gpus", "device=1", "-e", "GPUHOOK_CLOCKS=1500", "gpuhook-test:latest", "true",
                   runtime=runtime)
    assert r.returncode == 0, r.stderr
    calls = [c.split() for c in log.read_text()[len(before):].splitlines()]
    assert calls == [["set-clocks", "1", "1500", "1500"], ["reset-clocks", "1", "0", "0"]]  # GPU 1 only, undone
    bad = docker.run("--gpus", "device=1", "-e", "GPUHOOK_CLOCKS=fast", "gpuhook-test:latest", "true",
                     runtime=runtime)
    assert bad.returncode != 0 and "GPUHOOK_CLOCKS='fast': expected MHz" in bad.stderr
    plain = docker.run("--gpus", "device=1", "-e", "GPUHOOK_CLOCKS=1500", "gpuhook-test:latest", "true", runtime=None)
    assert plain.returncode != 0 and "needs gpuhook's poststop hook" in plain.stderr, plain.stderr
    calls = [c.split()[0] for c in log.read_text()[len(before):].splitlines()]
    assert calls == ["set-clocks", "reset-clocks"]  # the shim's container's, none for this one


def test_gpus_flag_refusal_reaches_the_user(docker: Docker) -> None:
    docker.use("nvidia")
    r = docker.run("--gpus", '"device=7"', "gpuhook-test:latest", "true")
    assert r.returncode != 0 and "--gpus='7': no NVIDIA GPU 7" in r.stderr


SHOW = """["sh", "-c", "echo SEES $$(ls /dev | grep -c '^nvidia[0-9]') nvidia $$(ls /dev/dri | wc -l) dri"]"""
# the example's services, with this test's image and a report of what each sees (Compose merges the two files)
OVERRIDE = "services:\n" + "".join(f"  {name}:\n    image: gpuhook-test:latest\n    network_mode: none\n"
                                    f"    command: {SHOW}\n" for name in ("cuda", "rocm", "any-gpu"))


def _compose(docker: Docker, *args: str, image_only: bool = False) -> subprocess.CompletedProcess[str]:
    """docker-compose on the example, with this test's image; `image_only` keeps the example's own commands."""
    override = docker.work / "override.yml"
    override.write_text(OVERRIDE if not image_only else "services:\n" + "".join(
        f"  {name}:\n    image: gpuhook-test:latest\n    network_mode: none\n" for name in ("cuda", "rocm", "any-gpu")))
    return subprocess.run(["docker-compose", "-p", "ghtest", "-f", str(EXAMPLE), "-f", str(override), *args],
                          env={**os.environ, "DOCKER_HOST": docker.sock}, capture_output=True, text=True,
                          timeout=180, check=False)


def _seen(output: str) -> dict[str, str]:
    """service -> what it printed ("2 nvidia 0 dri"), from `docker-compose up`'s prefixed lines."""
    out = {}
    for line in output.splitlines():
        prefix, _, text = line.partition("|")
        if "SEES" in text:
            out[prefix.strip().rsplit("_", 1)[0].removeprefix("ghtest_")] = text.split("SEES", 1)[1].strip()
    return out


@pytest.mark.skipif(shutil.which("docker-compose") is None and not os.environ.get("CI"),
                    reason="docker-compose not installed (tests/debian-packages.txt)")
def test_compose_mixed_fleet_example(docker: Docker) -> None:
    """examples/compose: the NVIDIA service gets GPU 0, the AMD service AMD GPU 0, the portable one every GPU of
    the host's vendor: NVIDIA on the mixed host, AMD on an AMD-only host (the same file, unedited)."""
    docker.use("mixed")
    try:
        up = _compose(docker, "up", "--no-color")
        assert up.returncode == 0, up.stdout + up.stderr
        assert _seen(up.stdout) == {"cuda": "1 nvidia 0 dri", "rocm": "0 nvidia 2 dri", "any-gpu": "2 nvidia 0 dri"}
        docker.use("amd")
        up = _compose(docker, "up", "--no-color", "any-gpu")
        assert up.returncode == 0, up.stdout + up.stderr
        assert _seen(up.stdout) == {"any-gpu": "0 nvidia 4 dri"}
        for host, nodes in (("amd", ["/dev/kfd", "/dev/dri/card1", "/dev/dri/card2", "/dev/dri/renderD128",
                                     "/dev/dri/renderD129"]), ("nvidia", ["/dev/nvidia0", "/dev/nvidia1"])):
            docker.use(host)  # the example's own command, as shipped: it exits 0 on either kind of host
            own = _compose(docker, "run", "--rm", "any-gpu", image_only=True)
            assert own.returncode == 0, own.stdout + own.stderr
            assert sorted(own.stdout.split()) == sorted(nodes)
    finally:
        down = _compose(docker, "down")
    assert down.returncode == 0, down.stderr
    assert subprocess.run(["docker", "-H", docker.sock, "ps", "-aq"], capture_output=True, text=True,
                          check=False).stdout == ""
