"""The DRA scenarios on the other Kubernetes versions gpuhook supports, each built from its pinned module set
(tools/components/kubernetes-<version>): 1.34, the first with resource.k8s.io/v1, as it comes (the
DRAExtendedResource gate alpha and off: the extended-resource pod stays Pending; the other alpha features the
tier turns on, control_plane.FEATURE_GATES), and 1.37. A subset of test_dra.py's scenarios (what every version
must do: the slices, a claim on both runtimes, CEL, Pending, MIG, admin access, only a claim grants) and all of
test_dra_extended.py's, which 1.36 runs in those modules; and a prioritized list (beta in 1.34, GA after)."""

from __future__ import annotations

import pytest

from . import test_dra
from .node import KUBERNETES_OTHERS, wait_for
from .test_dra import (  # noqa: F401 (the scenarios, collected again here on each version)
    SEE,
    Dra,
    test_a_cel_selector_written_for_nvidias_driver_selects_ours,
    test_a_claim_template_gives_the_pod_exactly_its_gpu,
    test_a_claim_that_cannot_be_met_stays_pending_with_the_schedulers_reason,
    test_a_mig_device_by_profile,
    test_a_pod_authors_own_env_or_annotation_gets_nothing,
    test_an_admin_access_claim_sees_a_gpu_another_pod_holds,
    test_the_slices_list_the_hosts_devices_by_the_vendors_names,
)
from .test_dra_extended import (  # noqa: F401
    test_a_pod_authors_own_ask_is_refused_with_the_way_to_ask_on_this_node,
    test_an_unchanged_pod_asking_nvidia_com_gpu_sees_one_gpu,
    test_more_than_the_node_has_stays_pending_with_the_schedulers_reason,
    test_the_vendor_classes_carry_the_device_plugins_resource_names,
    test_two_amd_gpus_by_count,
)

dra = test_dra.dra  # the cluster: test_dra's fixture, one per version here


@pytest.fixture(scope="module", params=KUBERNETES_OTHERS)
def kube_version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def kube_gates_off(kube_version: str) -> tuple[str, ...]:
    """1.34 as clusters run it: DRAExtendedResource (alpha) off."""
    return ("DRAExtendedResource",) if kube_version == "1.34" else ()


def test_a_prioritized_list_takes_the_first_alternative_the_node_has(dra: Dra) -> None:
    """firstAvailable (beta in 1.34, GA from 1.36): eight NVIDIA GPUs if the node had them, else one; the
    container sees the one, allocated for the second alternative."""
    claim = {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "eight", "deviceClassName": "nvidia.gpu.gpuhook.dev", "count": 8},
        {"name": "one", "deviceClassName": "nvidia.gpu.gpuhook.dev", "count": 1}]}]}}
    dra.claim_pod("first", claim, SEE + "; sleep 300")
    try:  # while it runs: a pod that ended has its claim deleted, sooner or later
        wait_for(lambda: dra.logs_so_far("first", "main"), 90, lambda: str(dra.status("first")))
        seen = dra.logs_so_far("first", "main")
        status = dra.plane.get("pod", "first")["status"]
        name = next(c["resourceClaimName"] for c in status["resourceClaimStatuses"])
        (result,) = dra.plane.get("resourceclaim", name)["status"]["allocation"]["devices"]["results"]
        assert result["request"] == "gpu/one", result
        assert seen == [f"nvidia{result['device'].removeprefix('gpu-')}"], (seen, result)
    finally:
        dra.delete("first")
