"""What `gpuhook doctor` says of each real engine here: Debian's containerd 1.6, Docker 20.10 and Podman 4.3, and
containerd 2.4 and CRI-O 1.36 from tools/components. Each is registered by the real `gpuhook configure` into files
of the test's; doctor's engine report (cli/doctor_engines.py, the real `--version` of each) names its release,
whether it reads CDI, the path its GPU containers take and how gpuhook is registered; unregistered, the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhook.cli import doctor_engines

from . import conftest

REPO = Path(__file__).parents[2]
DEBIAN = {"dockerd": "/usr/sbin/dockerd", "containerd": "/usr/bin/containerd", "podman": "/usr/bin/podman"}
pytestmark = pytest.mark.skipif(any(not os.path.exists(p) for p in DEBIAN.values()) and not os.environ.get("CI"),
                                reason="Debian's docker.io, containerd and podman are not all installed")
CONTAINERD_V2 = 'version = 2\nroot = "/var/lib/x"\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "p:1"\n'


def _components() -> Path:
    if shutil.which("go") is None and not os.environ.get("CI"):
        pytest.skip("containerd 2 and CRI-O are built from tools/components with Go, which is not installed")
    done = subprocess.run(["bash", str(REPO / "tools/components/build.sh")], capture_output=True, text=True,
                          timeout=3600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip())


def _configure(engine: str, path: Path, *more: str) -> None:
    r = subprocess.run([conftest.GPUHOOK, "configure", engine, "--config-path", str(path), "--runtime-path",
                        conftest.SHIM, *more], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def node(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A PATH holding the real engines (containerd 1.6), and each registered in a file of the test's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, real in {**DEBIAN, "crio": str(_components() / "crio")}.items():
        (bindir / name).symlink_to(real)
    paths = {"docker": str(tmp_path / "daemon.json"), "containerd": str(tmp_path / "containerd" / "config.toml"),
             "crio": str(tmp_path / "crio.conf.d/99-gpuhook.toml"), "podman": str(tmp_path / "hooks.d/gpuhook.json")}
    Path(paths["containerd"]).parent.mkdir()
    Path(paths["containerd"]).write_text(CONTAINERD_V2)
    for engine, path in paths.items():
        _configure(engine, Path(path))
    return bindir, paths


def _by_engine(found: list[tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return {f[1].split()[0]: f for f in found if "--gpus" not in f[1]}


def test_each_engine_registered(node: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    bindir, paths = node
    found = _by_engine(doctor_engines.checks(paths, proc=str(tmp_path / "no-proc"), search=str(bindir),
                                             cdi_specs=False))
    conf_d = Path(paths["containerd"]).parent / "conf.d" / "99-gpuhook.toml"
    assert found["docker"] == ("ok", "docker 20.10.24: reads no CDI specs (from Docker 25); GPU containers take the "
                               f"shim (docker run --runtime gpuhook); gpuhook registered in place in {paths['docker']}")
    assert found["containerd"] == ("ok", "containerd 1.6.20: reads no CDI specs (from containerd 1.7); GPU containers "
                                   "take the shim (a RuntimeClass with handler gpuhook; ctr run --runc-binary "
                                   f"gpuhook-runtime); gpuhook registered by the drop-in {conf_d}, which "
                                   f"{paths['containerd']} imports")
    assert found["crio"] == ("ok", "crio 1.36.3: reads CDI specs (container-device-interface 1.1.0); GPU containers "
                             "take the shim (a RuntimeClass with handler gpuhook); gpuhook registered in place in "
                             f"{paths['crio']}")
    assert found["podman"] == ("ok", "podman 4.3.1: reads CDI specs (container-device-interface 0.5.2); GPU "
                               "containers take the hook (hooks.d, for containers with gpuhook.dev/ annotations); "
                               f"gpuhook registered in place in {paths['podman']}")


def test_containerd_2_reads_cdi_and_takes_the_specs(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "containerd").symlink_to(_components() / "containerd")
    config = tmp_path / "config.toml"
    config.write_text("version = 3\n")
    _configure("containerd", config)
    (found,) = doctor_engines.checks({"containerd": str(config)}, search=str(bindir), cdi_specs=True)
    assert found == ("ok", "containerd 2.4.2: reads CDI specs (container-device-interface 1.1.0); GPU containers take "
                     "the shim (a RuntimeClass with handler gpuhook; ctr run --runc-binary gpuhook-runtime) or CDI "
                     f"(gpuhook's specs); gpuhook registered by the drop-in {tmp_path}/conf.d/99-gpuhook.toml, which "
                     f"{config} imports")
    _configure("containerd", config, "--revert")
    (found,) = doctor_engines.checks({"containerd": str(config)}, search=str(bindir), cdi_specs=False)
    assert found == ("warn", "containerd 2.4.2: reads CDI specs (container-device-interface 1.1.0); its containers "
                     f"cannot get GPUs: gpuhook is not registered in {config}",
                     "gpuhook configure containerd, then restart containerd (or gpuhook cdi generate: it reads CDI "
                     "specs)")


def test_unregistered_engines_get_the_fix(node: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    bindir, paths = node
    _configure("docker", Path(paths["docker"]), "--revert")
    _configure("podman", Path(paths["podman"]), "--revert")
    config = Path(paths["containerd"])
    config.write_text(CONTAINERD_V2)  # the imports line gone (config.toml rewritten): the drop-in is not read
    found = _by_engine(doctor_engines.checks(paths, proc=str(tmp_path / "no-proc"), search=str(bindir),
                                             cdi_specs=False))
    assert found["docker"] == ("warn", "docker 20.10.24: reads no CDI specs (from Docker 25); its containers cannot "
                               f"get GPUs: {paths['docker']} is absent: gpuhook is not registered",
                               "gpuhook configure docker, then restart dockerd")
    assert found["podman"][0] == "warn" and found["podman"][2] == ("gpuhook configure podman (or gpuhook cdi generate: "
                                                                   "it reads CDI specs)")
    assert found["containerd"] == ("fail", "containerd 1.6.20: reads no CDI specs (from containerd 1.7); "
                                   f"{config.parent}/conf.d/99-gpuhook.toml registers gpuhook but {config} does not "
                                   "import it: its GPU containers do not get the gpuhook runtime",
                                   "gpuhook configure containerd, then restart containerd")
    assert found["crio"][0] == "ok"  # left registered


@pytest.mark.parametrize("which", ["1.6", "2"], ids=["containerd 1.6", "containerd 2"])
def test_a_later_drop_in_that_hides_gpuhooks_runtime(which: str, tmp_path: Path) -> None:
    """NVIDIA's toolkit registered after gpuhook writes conf.d/99-nvidia.toml, a copy of config.toml's CRI section
    read after gpuhook's drop-in: containerd 1.6 keeps only that file's section (no gpuhook runtime), containerd 2
    merges both. Doctor reads containerd's own merged config, and its fix makes both runtimes stay."""
    components = _components()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    containerd = DEBIAN["containerd"] if which == "1.6" else str(components / "containerd")
    (bindir / "containerd").symlink_to(containerd)
    config = tmp_path / "config.toml"
    config.write_text(CONTAINERD_V2)
    _configure("containerd", config)
    nvidia = tmp_path / "conf.d" / "99-nvidia.toml"
    r = subprocess.run([str(components / "nvidia-ctk"), "runtime", "configure", "--runtime=containerd",
                        f"--config={config}", f"--drop-in-config={nvidia}"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0 and nvidia.is_file(), r.stderr
    (found,) = doctor_engines.checks({"containerd": str(config)}, search=str(bindir), cdi_specs=False)
    if which == "2":
        assert found[0] == "ok" and "registered by the drop-in" in found[1], found
        return
    assert found == ("fail", "containerd 1.6.20: reads no CDI specs (from containerd 1.7); gpuhook is registered by "
                     f"the drop-in {tmp_path}/conf.d/99-gpuhook.toml, which {config} imports, but containerd's merged "
                     f"config has no gpuhook runtime: {nvidia}, imported after it, replaces the section that holds it",
                     f"gpuhook configure containerd --in-place --config-path {nvidia}, then restart containerd")
    _configure("containerd", nvidia, "--in-place")  # the fix, as doctor says it
    (found,) = doctor_engines.checks({"containerd": str(config)}, search=str(bindir), cdi_specs=False)
    assert found[0] == "ok", found
    dump = subprocess.run([containerd, "--config", str(config), "config", "dump"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    assert "runtimes.gpuhook]" in dump and "runtimes.nvidia]" in dump
