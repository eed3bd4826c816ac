"""An MPS client through real containerd's CRI plugin (issue 45, 6): containerd gives every container its sandbox's
/dev/shm (a bind of the pod's own tmpfs); an MPS client needs its daemon's instead, as NVIDIA's device plugin and
DRA driver mount it. The container's spec and what it sees say which it got (test_mps_layout.py names NVIDIA's
layout and checks it through runc alone)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import conftest
from .cri_env import CriEnv, start

pytestmark = pytest.mark.skipif((shutil.which("containerd") is None or shutil.which("ctr") is None)
                                and not os.environ.get("CI"), reason="containerd not installed")

UUID = "GPU-00000000-5a1e-4000-8000-0000d00d0000"


@pytest.fixture(scope="module")
def cri(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[tuple[CriEnv, Path]]:
    d = tmp_path_factory.mktemp("mps-cri")
    with start(d, base_rootfs, conftest.SHIM, conftest.GPUHOOK,
               gpuhook_extra=f'[tuning]\nmps_dir = "{d}/mps"\n') as env:
        yield env, d / "mps"


def test_an_mps_pods_dev_shm_is_its_daemons_not_the_sandboxs(cri: tuple[CriEnv, Path]) -> None:
    env, mps_dir = cri
    script = ("grep ' /dev/shm ' /proc/self/mountinfo | tail -1; ls /dev/shm /tmp/nvidia-mps; "
              "env | grep ^CUDA_MPS_ | sort; echo written > /dev/shm/from-the-pod; sleep 1")
    r = env.run_to_completion(script, handler="gpuhook", keep_specs=True,
                              pod_annotations={"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia",
                                               "gpuhook.dev/mps": "true"})
    assert r.exit_code == 0, f"{r.output}\n{env.log_tail()}"
    lines = r.output.splitlines()
    shm = lines[0].split()
    assert shm[3] == "/shared" and shm[shm.index("-") + 1:shm.index("-") + 3] == ["tmpfs", "gpuhook-shm"], lines[0]
    assert {"cuda.mps.control", "control", "nvidia-cuda-mps-control.pid"} <= set(r.output.split()), r.output
    assert "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps" in lines and "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps" in lines
    mounts = [m for m in r.container_spec["mounts"] if m["destination"] == "/dev/shm"]
    assert [m["source"] for m in mounts] == [f"{mps_dir}/{UUID}/shm/shared"], mounts  # the sandbox's replaced
    sandbox_shm = [m for m in r.sandbox_spec.get("mounts", []) if m["destination"] == "/dev/shm"]
    assert sandbox_shm and sandbox_shm[0]["source"] != mounts[0]["source"]  # the pause container keeps its own
    assert not (mps_dir / UUID).exists()  # the pod gone: its daemon, directory and tmpfs with it
