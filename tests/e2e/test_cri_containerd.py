"""Real containerd's CRI plugin, driven over CRI gRPC as the kubelet drives it (tests/e2e/cri_env.py): host-network
pods on the `runc` handler and on the `gpuhook` handler that `gpuhook configure containerd` registers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.cri_client import parse_log

from .cri_env import CriEnv

pytestmark = pytest.mark.skipif((shutil.which("containerd") is None or shutil.which("ctr") is None)
                                and not os.environ.get("CI"), reason="containerd not installed")

SCRIPT = "echo hello; ls /dev"


def _devices(output: str) -> list[str]:
    return output.split()[1:]


def test_runc_handler_runs_a_pod(cri_containerd: CriEnv) -> None:
    env = cri_containerd
    r = env.run_to_completion(SCRIPT, handler="runc")
    assert r.exit_code == 0, f"exit {r.exit_code}, output {r.output!r}\n{env.log_tail()}"
    assert r.output.splitlines()[:1] == ["hello"], f"output {r.output!r}\n{env.log_tail()}"
    raw = Path(r.log_path).read_text()
    assert [(x.stream, x.partial, x.text) for x in parse_log(raw)][:1] == [("stdout", False, "hello")], raw
    assert "null" in _devices(r.output) and "nvidia0" not in _devices(r.output), r.output


def test_gpuhook_handler_without_a_request_passes_through(cri_containerd: CriEnv) -> None:
    env = cri_containerd
    r = env.run_to_completion(SCRIPT, handler="gpuhook")
    assert r.exit_code == 0, f"exit {r.exit_code}, output {r.output!r}\n{env.log_tail()}"
    assert r.output.splitlines()[:1] == ["hello"], f"output {r.output!r}\n{env.log_tail()}"
    gpu_nodes = [n for n in _devices(r.output) if n.startswith(("nvidia", "kfd", "dri"))]
    assert gpu_nodes == [], f"GPU nodes without a request: {gpu_nodes}\n{env.log_tail()}"


def test_gpuhook_handler_gives_the_pods_gpu(cri_containerd: CriEnv) -> None:
    env = cri_containerd
    r = env.run_to_completion(SCRIPT, handler="gpuhook",
                              pod_annotations={"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"})
    assert r.exit_code == 0, f"exit {r.exit_code}, output {r.output!r}\n{env.log_tail()}"
    devices = _devices(r.output)
    assert "nvidia0" in devices and "nvidiactl" in devices, f"no /dev/nvidia0: {devices}\n{env.log_tail()}"
    assert "nvidia1" not in devices, f"/dev/nvidia1 was not asked for: {devices}\n{env.log_tail()}"
