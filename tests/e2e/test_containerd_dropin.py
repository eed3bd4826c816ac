"""`gpuhook configure containerd`'s drop-in against the real containerds: Debian's 1.6 (config version 2, which
replaces a plugin's whole section with an imported file's) and 2.4 from tools/components (version 3, merged), each on
a private root and socket. After configure, containerd's own `config dump` shows the gpuhook runtime and the settings
config.toml had; a GPU pod runs through the gpuhook handler on a simulated host; after --revert the dump has no
gpuhook and config.toml is byte-identical to before."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpuhook.engines.wanted import Wanted

from . import conftest
from .cri_env import PAUSE_IMAGE, start

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.skipif((shutil.which("containerd") is None or shutil.which("ctr") is None)
                                and not os.environ.get("CI"), reason="containerd not installed")


def _containerd2() -> str:
    """containerd 2 from tools/components (built once per machine); skipped without Go outside CI."""
    if shutil.which("go") is None and not os.environ.get("CI"):
        pytest.skip("containerd 2 is built from tools/components with Go, which is not installed")
    done = subprocess.run(["bash", str(REPO / "tools/components/build.sh")], capture_output=True, text=True,
                          timeout=3600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return str(Path(done.stdout.strip()) / "containerd")


def _dump(containerd: str, config: Path) -> dict[str, Any]:
    r = subprocess.run([containerd, "--config", str(config), "config", "dump"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return tomllib.loads(r.stdout)


def _runtimes(dump: dict[str, Any]) -> dict[str, Any]:
    """The CRI plugin's runtimes in a dump of containerd 1.x (io.containerd.grpc.v1.cri) or 2.x (cri.v1.runtime)."""
    plugins = dump["plugins"]
    cri = plugins.get("io.containerd.cri.v1.runtime") or plugins["io.containerd.grpc.v1.cri"]
    runtimes: dict[str, Any] = cri["containerd"]["runtimes"]
    return runtimes


def _sandbox(dump: dict[str, Any]) -> str:
    plugins = dump["plugins"]
    if "io.containerd.cri.v1.images" in plugins:
        return str(plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"])
    return str(plugins["io.containerd.grpc.v1.cri"]["sandbox_image"])


@pytest.mark.parametrize("which", ["1.6", "2"], ids=["containerd 1.6", "containerd 2"])
def test_drop_in_registers_runs_a_gpu_pod_and_reverts(which: str, tmp_path_factory: pytest.TempPathFactory,
                                                     base_rootfs: str) -> None:
    containerd = (shutil.which("containerd") or "containerd") if which == "1.6" else _containerd2()
    d = tmp_path_factory.mktemp(f"dropin-{which}")
    config, drop_in = d / "containerd.toml", d / "conf.d" / "99-gpuhook.toml"
    before: dict[str, str] = {}

    def register(text: str, wanted: Wanted) -> str:
        """What the admin does: config.toml as it was, then `gpuhook configure containerd` on it."""
        before["text"] = text
        config.write_text(text)
        r = subprocess.run([conftest.GPUHOOK, "configure", "containerd", "--config-path", str(config),
                            "--runtime-path", conftest.SHIM], env={**os.environ, "GPUHOOK_CONFIG": wanted.config},
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1].startswith(f"changed {drop_in}: added the imports line to {config}")
        dump = _dump(containerd, config)
        assert _runtimes(dump)["gpuhook"]["options"]["BinaryName"] == conftest.SHIM
        assert "runc" in _runtimes(dump) and _sandbox(dump) == PAUSE_IMAGE  # config.toml's CRI settings kept
        return config.read_text()

    with start(d, base_rootfs, conftest.SHIM, conftest.GPUHOOK, containerd=containerd, registration=register) as env:
        assert "runtimes.gpuhook" not in before["text"] and drop_in.is_file()
        r = env.run_to_completion("ls /dev", handler="gpuhook",
                                  pod_annotations={"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"})
        assert r.exit_code == 0, f"exit {r.exit_code}, output {r.output!r}\n{env.log_tail()}"
        devices = r.output.split()
        assert "nvidia1" in devices and "nvidia0" not in devices, f"{devices}\n{env.log_tail()}"

    r = subprocess.run([conftest.GPUHOOK, "configure", "containerd", "--config-path", str(config), "--revert"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert config.read_bytes() == before["text"].encode() and not drop_in.exists()
    dump = _dump(containerd, config)
    assert "gpuhook" not in _runtimes(dump) and "runc" in _runtimes(dump) and _sandbox(dump) == PAUSE_IMAGE
