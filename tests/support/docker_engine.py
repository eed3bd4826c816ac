"""A private dockerd of one Docker generation for the e2e tier: Debian's Docker 20.10 (docker.io), or Docker 28 and
29 as tools/components/build.sh builds them from their module sets (with containerd 2.4 that dockerd starts from its
PATH and the docker CLI 29). Everything of its own: data-root, exec-root, pidfile, socket, daemon.json, no bridge,
no iptables; the image is this checkout's test rootfs, imported."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).parents[2]
DEBIAN = {"dockerd": "/usr/sbin/dockerd", "docker": "/usr/bin/docker"}  # docker.io (tests/debian-packages.txt)
IMAGE = "gpuhook-test:latest"


@dataclass(frozen=True)
class Build:
    """One generation's programs: dockerd, the docker CLI, and the directory dockerd's PATH starts with (its
    containerd, containerd-shim-runc-v2 and docker-proxy; empty for Debian's, which has them in /usr/bin)."""

    generation: str  # "20.10", "28", "29"
    dockerd: str
    docker: str
    bindir: str


def build(generation: str) -> Build:
    """The programs of `generation`: Debian's for 20.10, else `build.sh docker-<generation>`'s (a cold build takes
    minutes, once per machine; later ones find the cache). Runs the build; AssertionError with its log's end."""
    if generation == "20.10":
        return Build(generation, DEBIAN["dockerd"], DEBIAN["docker"], "")
    done = subprocess.run(["bash", str(REPO / "tools/components/build.sh"), f"docker-{generation}"],
                          capture_output=True, text=True, timeout=3600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.strip().splitlines()[-1]
    return Build(generation, f"{out}/dockerd", f"{out}/docker", out)


@dataclass
class Engine:
    """A running private dockerd: `cli(args)` runs its docker CLI, `run(args)` a container (--rm, no network)."""

    build: Build
    work: Path
    sock: str
    path: str  # dockerd's PATH

    def cli(self, *args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
        """`docker -H SOCK ARGS`. Runs it."""
        return subprocess.run([self.build.docker, "-H", self.sock, *args], capture_output=True, text=True,
                              timeout=timeout, check=False)

    def run(self, *args: str, runtime: str | None = "gpuhook") -> subprocess.CompletedProcess[str]:
        """`docker run --rm --network none [--runtime RUNTIME] ARGS`. Runs it."""
        return self.cli("run", "--rm", "--network", "none", *(["--runtime", runtime] if runtime else []), *args)


@contextmanager
def start(work: Path, build: Build, daemon_json: Path, rootfs: str, path_first: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> Iterator[Engine]:
    """dockerd of `build` on `daemon_json`, everything else under `work`, `path_first` in front of its PATH (the
    --gpus helpers it looks up), `env` added to its environment; the test image imported; stopped afterwards and
    its exec-root unmounted. Starts processes, writes under `work`."""
    work.mkdir(parents=True, exist_ok=True)
    sock = f"unix://{work}/docker.sock"
    path = ":".join([*path_first, *([build.bindir] if build.bindir else []), os.environ["PATH"]])
    argv = [build.dockerd, "--config-file", str(daemon_json), "--data-root", str(work / "data"),
            "--exec-root", str(work / "exec"), "--pidfile", str(work / "docker.pid"), "-H", sock,
            "--storage-driver=vfs", "--iptables=false", "--bridge=none"]
    if build.generation != "20.10":
        argv += ["--ip6tables=false", "--userland-proxy=false"]
    logs = open(work / "dockerd.log", "w")  # noqa: SIM115 (kept open for the daemon's lifetime)
    dockerd = subprocess.Popen(argv, env={**os.environ, **(env or {}), "PATH": path}, stdout=logs, stderr=logs)
    engine = Engine(build=build, work=work, sock=sock, path=path)
    try:
        for _ in range(240):  # a minute at most
            if dockerd.poll() is not None or engine.cli("version", timeout=10).returncode == 0:
                break
            time.sleep(0.25)
        up = engine.cli("version", timeout=10)
        assert up.returncode == 0, f"dockerd {build.generation} did not come up: " + \
            (work / "dockerd.log").read_text()[-3000:]
        tar = subprocess.run(["tar", "-C", rootfs, "-c", "."], capture_output=True, check=True).stdout
        imported = subprocess.run([build.docker, "-H", sock, "import", "-", IMAGE], input=tar, capture_output=True,
                                  timeout=120, check=False)
        assert imported.returncode == 0, imported.stderr.decode(errors="replace")
        yield engine
    finally:
        left = engine.cli("ps", "-aq", timeout=30).stdout.split() if dockerd.poll() is None else []
        if left:
            engine.cli("rm", "-f", *left, timeout=60)
        dockerd.send_signal(signal.SIGTERM)
        try:
            dockerd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dockerd.kill()
            dockerd.wait(timeout=10)
        logs.close()
        subprocess.run(["umount", "-R", "-l", str(work / "exec")], capture_output=True, check=False)


def as_installed(build: Build) -> list[str]:
    """An argv prefix that runs a command where `build`'s dockerd is the installed one: in a mount namespace of its
    own, over the dockerd gpuhook finds on its fixed PATH (proc.SAFE_ENV: /usr/sbin/dockerd, Debian's), for what
    gpuhook asks `dockerd --version`; [] for Debian's own."""
    from gpuhook.proc import SAFE_ENV

    installed = shutil.which("dockerd", path=SAFE_ENV["PATH"])
    if not build.bindir:
        return []
    assert installed is not None, "no dockerd on gpuhook's PATH to stand in for (CI installs docker.io)"
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount --bind "{build.dockerd}" "{installed}" && exec "$@"', "-"]


def available(generation: str) -> str:
    """Why `generation` cannot run here ("" where it can): Debian's docker.io missing, or no Go to build 28/29
    (CI installs both, and gets neither skip)."""
    if os.environ.get("CI"):
        return ""
    if generation == "20.10":
        return "" if all(os.path.exists(p) for p in DEBIAN.values()) else "Debian's docker.io is not installed"
    return "" if shutil.which("go") else f"Docker {generation} is built from tools/components with Go, not installed"
