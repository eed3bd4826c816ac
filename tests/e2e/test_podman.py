"""Real Podman, wired through the shipped hooks.d file (hook mode), with --annotation gpuhook.dev/..."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec, build_host

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


@pytest.fixture
def cdi_work(podman, tmp_path: Path):  # type: ignore[no-untyped-def]
    """(run, gpuhook(args, host) -> CompletedProcess, spec path maker): specs go to Podman's /var/run/cdi as
    gpuhook-e2e-*, removed afterwards (two specs naming one device make Podman drop it)."""
    for old in CDI_DIR.glob("gpuhook-e2e-*"):
        old.unlink()
    CDI_DIR.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []

    def gpuhook(args: list[str], host: str) -> subprocess.CompletedProcess[str]:
        config = tmp_path / "config.toml"
        config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n')
        env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}
        return subprocess.run([conftest.GPUHOOK, *args], env=env, capture_output=True, text=True, check=False)

    def spec(name: str) -> Path:
        made.append(CDI_DIR / f"gpuhook-e2e-{name}")
        return made[-1]

    yield podman[0], gpuhook, spec
    for path in made:
        path.unlink(missing_ok=True)


def test_default_amd_spec_is_one_debians_podman_takes(cdi_work, mixed_host: str) -> None:  # type: ignore[no-untyped-def]
    """No --cdi-version: gpuhook finds Podman 4.3.1 (and containerd 1.6, Docker 20.10, which read no CDI) and writes
    0.5.0, saying what the user adds instead of additionalGids."""
    run, gpuhook, spec = cdi_work
    path = spec("amd.json")
    r = gpuhook(["cdi", "generate", "--vendor", "amd", "--output", str(path)], mixed_host)
    assert r.returncode == 0, r.stderr
    assert "Podman 4.3.1 reads cdiVersion up to 0.5.0" in r.stdout and "--group-add 109 --group-add 44" in r.stderr
    assert json.loads(path.read_text())["cdiVersion"] == "0.5.0"
    ran = run("--device", "amd.com/gpu=0", "localhost/gpuhook-test:latest", "sh", "-c", "ls /dev/dri; ls /dev/kfd")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["card1", "renderD128", "/dev/kfd"]
    validated = gpuhook(["cdi", "validate", str(path)], mixed_host)
    assert validated.returncode == 0 and "taken by Podman 4.3.1" in validated.stdout, validated.stdout


def test_validate_says_why_podman_4_3_refuses_a_0_7_spec(cdi_work, mixed_host: str) -> None:  # type: ignore[no-untyped-def]
    run, gpuhook, spec = cdi_work
    path = spec("amd-0.7.json")
    assert gpuhook(["cdi", "generate", "--vendor", "amd", "--cdi-version", "0.7.0", "--output", str(path)],
                   mixed_host).returncode == 0
    ran = run("--device", "amd.com/gpu=0", "localhost/gpuhook-test:latest", "true")
    assert ran.returncode != 0 and "unresolvable CDI devices amd.com/gpu=0" in ran.stderr  # all Podman says
    r = gpuhook(["cdi", "validate", str(path)], mixed_host)
    assert r.returncode == 1
    assert f'{path}: Podman 4.3.1 refuses it: unknown field "additionalGids" in containerEdits' in r.stdout


def test_if_changed_and_doctor_after_a_driver_upgrade(cdi_work, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run, gpuhook, spec = cdi_work
    host = build_host(str(tmp_path / "host"), HostSpec(nvidia=2, nvidia_driver="535.54.03"))
    path = spec("nvidia.json")
    generate = ["cdi", "generate", "--vendor", "nvidia", "--output", str(path), "--if-changed"]
    assert gpuhook(generate, host).returncode == 0
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    again = gpuhook(generate, host)
    assert again.returncode == 0 and path.stat().st_mtime_ns == 1_000_000_000 and "unchanged" in again.stdout
    build_host(host, HostSpec(nvidia=2, nvidia_driver="550.54.15"))  # the driver upgraded under the spec
    doctor = gpuhook(["doctor"], host)
    assert f"warn  CDI spec {path} is stale: it mounts" in doctor.stdout and "550.54.15" in doctor.stdout
    assert gpuhook(generate, host).returncode == 0 and path.stat().st_mtime_ns != 1_000_000_000
    ran = run("--device", "nvidia.com/gpu=1", "localhost/gpuhook-test:latest", "sh", "-c",
              "ls /dev | grep nvidia; ls /usr/lib/x86_64-linux-gnu | grep libcuda.so.5")
    assert ran.returncode == 0, ran.stderr
    assert "nvidia1" in ran.stdout.split() and "libcuda.so.550.54.15" in ran.stdout and "535" not in ran.stdout
    assert f"CDI spec {path} is stale" not in gpuhook(["doctor"], host).stdout


def test_podman_cdi_mig_devices(cdi_work, tmp_path_factory: pytest.TempPathFactory) -> None:  # type: ignore[no-untyped-def]
    """A MIG device by index form and by UUID: its caps nodes and its GPU's node, none of its siblings'."""
    from gpuhook.vendors.nvidia import sim_mig

    host = build_host(str(tmp_path_factory.mktemp("mig") / "host"),
                      HostSpec(nvidia=2, mig=("3g.40gb", "2g.20gb", "1g.10gb"), mig_gpus=1))
    run, gpuhook, spec = cdi_work
    path = spec("nvidia.json")
    r = gpuhook(["cdi", "generate", "--vendor", "nvidia", "--output", str(path)], host)
    assert r.returncode == 0, r.stderr
    names = [d["name"] for d in json.loads(path.read_text())["devices"]]
    assert {"0:0", "0:1", "0:2", sim_mig.uuid(0, 2)} <= set(names)
    for device in ("0:2", sim_mig.uuid(0, 2)):
        ran = run("--device", f"nvidia.com/gpu={device}", "localhost/gpuhook-test:latest", "sh", "-c",
                  "ls /dev | grep -E '^nvidia[0-9]'; ls /dev/nvidia-caps")
        assert ran.returncode == 0, ran.stderr
        caps = [f"nvidia-cap{sim_mig.minor(0, 3)}", f"nvidia-cap{sim_mig.minor(0, 3, 0)}"]
        assert ran.stdout.split() == ["nvidia0", *caps]
