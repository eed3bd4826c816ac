"""install.sh from this checkout, into a scratch prefix: install, --configure podman, --uninstall reverts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).parents[2]
HOOKS = Path("/usr/share/containers/oci/hooks.d/gpuhook.json")


def test_install_configure_uninstall(tmp_path: Path) -> None:
    before = HOOKS.read_bytes() if HOOKS.exists() else None
    env = {**os.environ, "GPUHOOK_PREFIX": str(tmp_path / "opt"), "GPUHOOK_BINDIR": str(tmp_path / "bin")}
    r = subprocess.run(["bash", str(REPO / "install.sh"), "--configure", "podman"], env=env, capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        version = subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True)
        assert version.stdout.startswith("gpuhook ")
        hook = json.loads(HOOKS.read_text())
        assert hook["hook"]["path"] == str(tmp_path / "bin/gpuhook") and "prestart" in hook["stages"]
        if not any(Path(d, "nvidia-container-runtime-hook").exists() for d in ("/usr/bin", "/usr/sbin", "/bin")):
            # Docker's --gpus hook, linked where NVIDIA's toolkit has none
            assert os.readlink(tmp_path / "bin/nvidia-container-runtime-hook") == str(
                tmp_path / "opt/bin/nvidia-container-runtime-hook")
        again = subprocess.run(["bash", str(REPO / "install.sh")], env=env, capture_output=True, text=True,
                               timeout=600, check=False)
        assert again.returncode == 0, again.stderr  # idempotent
    finally:
        out = subprocess.run(["bash", str(REPO / "install.sh"), "--uninstall"], env=env, capture_output=True,
                             text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert (HOOKS.read_bytes() if HOOKS.exists() else None) == before  # the engine's file is as it was
    assert not (tmp_path / "opt").exists() and not list((tmp_path / "bin").iterdir())


def test_release_tarball_installs_offline(tmp_path: Path) -> None:
    """build-release.sh packs the pinned wheels; install.sh then installs with --no-index (no registry)."""
    r = subprocess.run(["bash", str(REPO / "packaging/build-release.sh")], capture_output=True, text=True,
                       timeout=600, check=False, env={**os.environ, "PYTHON": "/usr/bin/python3"})
    assert r.returncode == 0, r.stderr
    (tarball,) = (REPO / "dist").glob("gpuhook-*.tar.gz")
    subprocess.run(["tar", "-C", str(tmp_path), "-xzf", str(tarball)], check=True)
    (src,) = tmp_path.glob("gpuhook-*")
    assert list((src / "packaging/wheels").glob("jsonschema-*.whl"))
    env = {**os.environ, "GPUHOOK_PREFIX": str(tmp_path / "opt"), "GPUHOOK_BINDIR": str(tmp_path / "bin"),
           "PIP_INDEX_URL": "http://127.0.0.1:9/none"}  # any attempt to reach a registry would fail
    inst = subprocess.run(["bash", str(src / "install.sh")], env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    assert subprocess.run([str(tmp_path / "bin/gpuhook"), "version"], capture_output=True, text=True).returncode == 0
    subprocess.run(["bash", str(src / "install.sh"), "--uninstall"], env=env, capture_output=True, check=True)
    tarball.unlink()
