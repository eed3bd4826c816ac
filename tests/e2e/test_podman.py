"""Real Podman, wired through the shipped hooks.d file (hook mode), with --annotation gpuhook.dev/..."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import conftest

pytestmark = pytest.mark.skipif(shutil.which("podman") is None and not os.environ.get("CI"),
                                reason="podman is not installed (tests/run.sh installs it; CI must not skip)")
SHIPPED = Path(__file__).parents[2] / "runtime-config/hooks.d/gpuhook.json"


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str, mixed_host: str):  # type: ignore[no-untyped-def]
    work = tmp_path_factory.mktemp("podman")
    config = work / "config.toml"
    config.write_text(f'host_root = "{mixed_host}"\nlog_file = "{work}/gpuhook.log"\n')
    hooks = work / "hooks.d"
    hooks.mkdir()
    hook = json.loads(SHIPPED.read_text())
    hook["hook"]["path"] = conftest.GPUHOOK  # this checkout's launcher instead of /usr/local/bin/gpuhook
    hook["hook"]["env"] = [f"GPUHOOK_CONFIG={config}"]
    (hooks / "gpuhook.json").write_text(json.dumps(hook))
    base = ["podman", "--root", str(work / "storage"), "--runroot", str(work / "run"), "--storage-driver", "vfs",
            "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc",
            "--hooks-dir", str(hooks)]
    tar = work / "rootfs.tar"
    subprocess.run(["tar", "-C", base_rootfs, "-cf", str(tar), "."], check=True)
    subprocess.run([*base, "import", str(tar), "localhost/gpuhook-test:latest"], check=True, capture_output=True)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, "run", "--rm", "--net", "none", "--ulimit", "nofile=1024:1024",
                               "--ulimit", "nproc=4096:4096", *args], capture_output=True, text=True, timeout=120,
                              check=False)

    yield run, work
    subprocess.run([*base, "rm", "-af"], capture_output=True, check=False)


def test_podman_container_sees_its_gpu(podman) -> None:  # type: ignore[no-untyped-def]
    run, work = podman
    r = run("--annotation", "gpuhook.dev/gpus=1", "--annotation", "gpuhook.dev/vendor=nvidia", "--user", "1000:1000",
            "localhost/gpuhook-test:latest", "sh", "-c",
            "ls /dev | grep nvidia; nvidia-smi; dlopen-probe libcuda.so.1; cat /dev/nvidia1 2>&1; echo end")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert "GPUs: 1" in r.stdout and "dlopen libcuda.so.1 ok" in r.stdout
    assert "No such device or address" in r.stdout  # cgroup and permissions let the user open it
    events = [json.loads(x)["event"] for x in (work / "gpuhook.log").read_text().splitlines()]
    assert "applied live" in events and "poststop" in events  # both stages ran from the one hooks.d file


def test_podman_amd_gpu_for_an_unprivileged_user(podman) -> None:  # type: ignore[no-untyped-def]
    run, _ = podman
    r = run("--annotation", "gpuhook.dev/gpus=0", "--annotation", "gpuhook.dev/vendor=amd", "--user", "1000:1000",
            "localhost/gpuhook-test:latest", "sh", "-c", "ls /dev/dri; cat /dev/dri/renderD128 /dev/kfd 2>&1; echo end")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["card1", "renderD128"]
    assert r.stdout.count("No such device or address") == 2


def test_podman_without_annotation_is_untouched(podman) -> None:  # type: ignore[no-untyped-def]
    run, _ = podman
    r = run("localhost/gpuhook-test:latest", "ls", "/dev")
    assert r.returncode == 0 and "nvidia" not in r.stdout and "kfd" not in r.stdout


CDI_DIR = Path("/var/run/cdi")


@pytest.fixture
def cdi_specs(podman, mixed_host: str, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Specs written by `gpuhook cdi generate` into Podman's CDI directory (removed afterwards)."""
    for old in CDI_DIR.glob("gpuhook-e2e-*"):
        old.unlink()
    config = tmp_path_factory.mktemp("cdi") / "config.toml"
    config.write_text(f'host_root = "{mixed_host}"\n')
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}
    CDI_DIR.mkdir(parents=True, exist_ok=True)
    made = [CDI_DIR / "gpuhook-e2e-nvidia.json", CDI_DIR / "gpuhook-e2e-amd.yaml"]
    for args in (["--vendor", "nvidia", "--output", str(made[0])],
                 ["--vendor", "amd", "--format", "yaml", "--cdi-version", "0.5.0", "--output", str(made[1])]):
        r = subprocess.run([conftest.GPUHOOK, "cdi", "generate", *args], env=env, capture_output=True, text=True,
                           check=False)
        assert r.returncode == 0, r.stderr
    yield podman[0]
    for path in made:
        path.unlink(missing_ok=True)


def test_podman_cdi_nvidia(cdi_specs) -> None:  # type: ignore[no-untyped-def]
    r = cdi_specs("--device", "nvidia.com/gpu=1", "localhost/gpuhook-test:latest", "sh", "-c",
                  "ls /dev | grep nvidia; dlopen-probe libcuda.so.1; nvidia-smi")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl"]
    assert "dlopen libcuda.so.1 ok" in r.stdout and "GPUs: 1" in r.stdout  # update-ldcache hook, read-only mounts


def test_podman_cdi_amd_yaml_for_an_older_cdi_client(cdi_specs) -> None:  # type: ignore[no-untyped-def]
    r = cdi_specs("--device", "amd.com/gpu=0", "localhost/gpuhook-test:latest", "sh", "-c",
                  "ls /dev/dri; ls /dev/kfd")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["card1", "renderD128", "/dev/kfd"]
