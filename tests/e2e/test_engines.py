"""Real engines on a simulated host: dockerd (Debian's docker.io) on the daemon.json `gpuhook configure
docker` wrote, and containerd through `ctr run --runc-binary`. Each daemon is private to the test module."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator

import pytest

from . import conftest

pytestmark = pytest.mark.skipif((shutil.which("dockerd") is None or shutil.which("containerd") is None)
                                and not os.environ.get("CI"), reason="docker.io/containerd not installed")


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory, mixed_host: str, base_rootfs: str) -> Iterator[dict[str, str]]:
    d = tmp_path_factory.mktemp("engines")
    config = d / "gpuhook.toml"
    config.write_text(f'host_root = "{mixed_host}"\nstate_dir = "{d}/state"\n')
    env = {**os.environ, "GPUHOOK_CONFIG": str(config)}
    shim = conftest.SHIM
    r = subprocess.run([conftest.GPUHOOK, "configure", "docker", "--config-path", str(d / "daemon.json"),
                        "--runtime-path", shim], env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    docker_sock, ctd_sock = f"unix://{d}/docker.sock", f"{d}/containerd.sock"
    logs = open(d / "daemons.log", "w")  # noqa: SIM115 (kept open for the daemons' lifetime)
    dockerd = subprocess.Popen(["dockerd", "--config-file", str(d / "daemon.json"), "--data-root", str(d / "data"),
                                "--exec-root", str(d / "exec"), "--pidfile", str(d / "docker.pid"),
                                "-H", docker_sock, "--storage-driver=vfs", "--iptables=false", "--bridge=none"],
                               env=env, stdout=logs, stderr=logs)
    (d / "containerd.toml").write_text(f'version = 2\nroot = "{d}/ctd-root"\nstate = "{d}/ctd-state"\n'
                                       f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                                       f'[grpc]\n  address = "{ctd_sock}"\n')
    containerd = subprocess.Popen(["containerd", "--config", str(d / "containerd.toml")], env=env, stdout=logs,
                                  stderr=logs)
    try:
        conftest.wait_ok(["docker", "-H", docker_sock, "info"], "dockerd")
        conftest.wait_ok(["ctr", "-a", ctd_sock, "version"], "containerd")
        tar = subprocess.run(["tar", "-C", base_rootfs, "-c", "."], capture_output=True, check=True).stdout
        subprocess.run(["docker", "-H", docker_sock, "import", "-", "gpuhook-test:latest"], input=tar, check=True,
                       capture_output=True)
        subprocess.run(["docker", "-H", docker_sock, "save", "-o", str(d / "img.tar"), "gpuhook-test:latest"],
                       check=True)
        subprocess.run(["ctr", "-a", ctd_sock, "-n", "gh", "images", "import", "--snapshotter", "native",
                        str(d / "img.tar")], check=True, capture_output=True)
        yield {"docker": docker_sock, "ctr": ctd_sock, "log": str(d / "daemons.log")}
    finally:
        for p in (dockerd, containerd):
            p.send_signal(signal.SIGTERM)
        for p in (dockerd, containerd):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        logs.close()
        subprocess.run(["umount", "-R", "-l", str(d / "exec")], capture_output=True, check=False)


def test_docker_runtime_gpuhook_with_the_env_request(engines: dict[str, str]) -> None:
    r = subprocess.run(["docker", "-H", engines["docker"], "run", "--rm", "--network", "none", "--runtime", "gpuhook",
                        "-e", "AMD_VISIBLE_DEVICES=0", "gpuhook-test:latest", "sh", "-c",
                        "ls /dev/dri; ls /dev/kfd; grep Groups /proc/self/status"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    assert out[:3] == ["card1", "renderD128", "/dev/kfd"]
    assert {"44", "109"} <= set(out[4:])


def test_docker_without_request_is_untouched(engines: dict[str, str]) -> None:
    r = subprocess.run(["docker", "-H", engines["docker"], "run", "--rm", "--network", "none", "--runtime", "gpuhook",
                        "gpuhook-test:latest", "ls", "/dev"], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "kfd" not in r.stdout and "nvidia" not in r.stdout, r.stderr


def test_docker_shows_gpuhooks_error(engines: dict[str, str]) -> None:
    r = subprocess.run(["docker", "-H", engines["docker"], "run", "--rm", "--network", "none", "--runtime", "gpuhook",
                        "-e", "AMD_VISIBLE_DEVICES=7", "gpuhook-test:latest", "true"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0 and "gpuhook: AMD_VISIBLE_DEVICES='7': no AMD GPU 7" in r.stderr


def test_containerd_ctr_with_annotations(engines: dict[str, str]) -> None:
    r = subprocess.run(["ctr", "-a", engines["ctr"], "-n", "gh", "run", "--rm", "--snapshotter", "native",
                        "--runc-binary", conftest.SHIM, "--annotation", "gpuhook.dev/gpus=1",
                        "--annotation", "gpuhook.dev/vendor=nvidia", "docker.io/library/gpuhook-test:latest",
                        f"ctr-{os.getpid()}", "sh", "-c", "ls /dev | grep nvidia; dlopen-probe libcuda.so.1"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert "dlopen libcuda.so.1 ok" in r.stdout
