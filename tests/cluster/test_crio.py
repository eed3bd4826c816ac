"""CRI-O 1.36, built from its module (tools/components/cri-o), with gpuhook registered by `gpuhook configure crio`'s
drop-in: a pod on the gpuhook handler gets the GPU it asked for through CRI-O and conmon, the pod's pause container
and a pod on runc get none, and a refusal reaches the CRI caller as gpuhook's one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.e2e import conftest as e2e
from tests.e2e.cri_env import CriEnv
from tests.support.cri_client import rpc_error_details

from .crio import start

SEE = "ls /dev | grep -E '^(nvidia[0-9]+|renderD[0-9]+)$' || true; ls /dev/dri 2>/dev/null | grep render || true"
NVIDIA1 = {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"}


@pytest.fixture(scope="module")
def crio(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[CriEnv]:
    with start(tmp_path_factory.mktemp("crio"), base_rootfs, e2e.SHIM, e2e.GPUHOOK) as env:
        yield env


def test_the_drop_in_names_gpuhooks_config(crio: CriEnv) -> None:
    assert f"GPUHOOK_CONFIG={crio.gpuhook_config}" in crio.config_text, crio.config_text


def test_a_pod_on_gpuhook_gets_its_gpu(crio: CriEnv) -> None:
    r = crio.run_to_completion(SEE, handler="gpuhook", pod_annotations=NVIDIA1)
    assert r.exit_code == 0 and r.output.split() == ["nvidia1"], f"{r.output!r}\n{crio.log_tail()}"
    records = [json.loads(p.read_text()) for p in Path(crio.dir, "gpuhook-state").rglob("*.json")
               if p.parent.name == "containers"]
    assert r.sandbox_id not in json.dumps(records), "the pause container got a record"
    amd = crio.run_to_completion(SEE, handler="gpuhook",
                                 pod_annotations={"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"})
    assert amd.exit_code == 0 and amd.output.split() == ["renderD128"], f"{amd.output!r}\n{crio.log_tail()}"


def test_a_pod_on_runc_gets_none(crio: CriEnv) -> None:
    r = crio.run_to_completion(SEE, handler="runc", pod_annotations=NVIDIA1)
    assert r.exit_code == 0 and r.output.split() == [], f"{r.output!r}\n{crio.log_tail()}"


def _refusal(crio: CriEnv, **asked: Any) -> str:
    """What the CRI caller was told when the gpuhook handler refused the pod's container (asked: run_to_completion's
    annotations)."""
    with pytest.raises(Exception) as caught:
        crio.run_to_completion(SEE, handler="gpuhook", **asked)
    cause = caught.value.__cause__
    assert isinstance(cause, grpc.RpcError), str(caught.value)
    return rpc_error_details(cause)


def test_a_refusal_reaches_the_caller_in_one_line(crio: CriEnv) -> None:
    detail = _refusal(crio, pod_annotations={"gpuhook.dev/gpus": "7", "gpuhook.dev/vendor": "nvidia"})
    assert "gpuhook-runtime:" in detail and "7" in detail and "Traceback" not in detail, detail


def test_a_pods_own_allocation_annotation_is_refused(crio: CriEnv) -> None:
    """CRI-O merges the pod's annotations into the container's spec: a pod author's gpuhook.dev/allocation must not
    pass for the kubelet's (which is the container's own annotation)."""
    forged = {"gpuhook.dev/allocation": "0123456789abcdef0123456789abcdef"}
    detail = _refusal(crio, pod_annotations=forged)
    assert "is the pod's, not the container's" in detail, detail
    detail = _refusal(crio, annotations=forged)  # the container's own: the allocation is looked up (and not found)
    assert "no such allocation" in detail, detail
