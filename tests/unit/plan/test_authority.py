"""Who grants GPUs ([policy] requests), tested with parsed requests and literal allocation records."""

from __future__ import annotations

import pytest

from gpuhook.config import Config, from_table
from gpuhook.errors import PolicyError
from gpuhook.plan.authority import Allocation, ClaimedDevice, PreparedClaim, authorize
from gpuhook.request.container import Selection
from gpuhook.request.tuning import Tuning
from tests.unit.parsing import parse_request

A = "gpuhook.dev/"
ID = "0123456789abcdef0123456789abcdef"
U0 = "GPU-00000000-0000-0000-0000-000000000000"
U1 = "GPU-00000001-0000-0000-0000-000000000000"
ANY = from_table({}, "/x")
ALLOCATED = from_table({"policy": {"requests": "allocated"}}, "/x")
WHOLE = Allocation(id=ID, resource="nvidia.com/gpu", vendor="nvidia", gpus=(U0, U1), devices=(U0, U1), shared=False,
                   created=100.0, expires=3700.0, claimed_by="pod/main", container="c1")
SHARED = Allocation(id=ID, resource="nvidia.com/gpu", vendor="nvidia", gpus=(U0,), devices=(f"{U0}::0",), shared=True,
                    created=100.0, expires=3700.0, claimed_by="pod/main", container="c1")
BOTH = "nvidia.com/gpu: 1 or amd.com/gpu: 1 or hygon.com/dcu: 1"

OWN_ASKS = [
    ("gpus all", {A + "gpus": "all"}, {}, f"{A}gpus='all'", BOTH),
    ("gpus count", {A + "gpus": "count:1"}, {}, f"{A}gpus='count:1'", BOTH),
    ("gpus index", {A + "gpus": "0"}, {}, f"{A}gpus='0'", BOTH),
    ("gpus with vendor", {A + "gpus": "0", A + "vendor": "amd"}, {}, f"{A}gpus='0'", "amd.com/gpu: 1"),
    ("nvidia env all", {}, {"NVIDIA_VISIBLE_DEVICES": "all"}, "NVIDIA_VISIBLE_DEVICES='all'", "nvidia.com/gpu: 1"),
    ("nvidia env uuid", {}, {"NVIDIA_VISIBLE_DEVICES": U1}, f"NVIDIA_VISIBLE_DEVICES={U1!r}", "nvidia.com/gpu: 1"),
    ("amd env", {}, {"AMD_VISIBLE_DEVICES": "0"}, "AMD_VISIBLE_DEVICES='0'", "amd.com/gpu: 1"),
]


@pytest.mark.parametrize(("annotations", "env", "quoted", "how"), [o[1:] for o in OWN_ASKS],
                         ids=[o[0] for o in OWN_ASKS])
def test_allocated_refuses_own_asks(annotations: dict[str, str], env: dict[str, str], quoted: str, how: str) -> None:
    with pytest.raises(PolicyError) as e:
        authorize(parse_request(annotations, env), None, ALLOCATED)
    assert str(e.value).startswith(f"{quoted}: on this node only the kubelet grants GPUs")
    assert '[policy] requests = "allocated"' in str(e.value)
    assert str(e.value).endswith(f"ask in the pod spec with resources.limits ({how})")


def test_allocated_refusal_names_the_configured_resource() -> None:
    config = from_table({"policy": {"requests": "allocated"},
                         "kubernetes": {"resources": {"nvidia": "example.com/h100"}}}, "/x")
    with pytest.raises(PolicyError, match=r"resources\.limits \(example\.com/h100: 1\)$"):
        authorize(parse_request({}, {"NVIDIA_VISIBLE_DEVICES": "all"}), None, config)


DRA_ASKS = [
    ("nvidia env", {}, {"NVIDIA_VISIBLE_DEVICES": "all"}, "DeviceClass nvidia.gpu.example.com", "nvidia.com/gpu: 1"),
    ("amd annotation", {A + "gpus": "0", A + "vendor": "amd"}, {}, "DeviceClass amd.gpu.example.com",
     "amd.com/gpu: 1"),
    ("any vendor", {A + "gpus": "all"}, {}, "DeviceClass gpu.example.com ", BOTH),
]


@pytest.mark.parametrize(("annotations", "env", "claim", "limits"), [o[1:] for o in DRA_ASKS],
                         ids=[o[0] for o in DRA_ASKS])
def test_allocated_refusal_on_a_dra_node_names_its_device_class_and_extended_resource(
        annotations: dict[str, str], env: dict[str, str], claim: str, limits: str) -> None:
    """Where gpuhook's DRA driver serves the node: a ResourceClaim of the chart's class, or the vendor's extended
    resource where the cluster serves it through DRA (the class's extendedResourceName)."""
    with pytest.raises(PolicyError) as e:
        authorize(parse_request(annotations, env), None, ALLOCATED, dra_driver="gpu.example.com")
    assert "on this node only the kubelet grants GPUs" in str(e.value)
    assert f"a ResourceClaim of {claim}" in str(e.value) and "gpu.example.com serves this node" in str(e.value)
    assert f"resources.limits ({limits}) where the cluster serves extended resources through DRA" in str(e.value)


def test_tuning_without_a_claim_on_a_dra_node_names_the_claim() -> None:
    with pytest.raises(PolicyError, match=r"needs GPUs the kubelet allocated: add a ResourceClaim of DeviceClass "
                                          r"gpu\.gpuhook\.dev "):
        authorize(parse_request({A + "clocks": "1500"}, {}), None, ALLOCATED, dra_driver="gpu.gpuhook.dev")


NO_GPUS = [
    ("nothing", {}, {}),
    ("nvidia env none: the driver alone", {}, {"NVIDIA_VISIBLE_DEVICES": "none"}),
    ("nvidia env void", {}, {"NVIDIA_VISIBLE_DEVICES": "void"}),
    ("gpus none", {A + "gpus": "none"}, {"NVIDIA_VISIBLE_DEVICES": "all"}),
    ("capabilities only", {A + "capabilities": "video"}, {}),
    ("env-only tuning", {A + "fine-grain-pcie": "true"}, {}),
]


@pytest.mark.parametrize(("annotations", "env"), [n[1:] for n in NO_GPUS], ids=[n[0] for n in NO_GPUS])
def test_allocated_passes_requests_without_gpus(annotations: dict[str, str], env: dict[str, str]) -> None:
    request = parse_request(annotations, env)
    assert authorize(request, None, ALLOCATED) is request


def test_nvidia_none_keeps_the_driver_selection() -> None:
    out = authorize(parse_request({}, {"NVIDIA_VISIBLE_DEVICES": "none"}), None, ALLOCATED)
    assert out.selections == (Selection(vendor="nvidia", devices=(), source="NVIDIA_VISIBLE_DEVICES", raw="none"),)


TUNING = [
    ("clocks", {A + "clocks": "1500"}),
    ("power limit", {A + "power-limit": "300"}),
    ("perf level", {A + "perf-level": "high"}),
    ("compute mode", {A + "compute-mode": "exclusive-process"}),
    ("exclusive", {A + "exclusive": "true"}),
]


@pytest.mark.parametrize("annotations", [t[1] for t in TUNING], ids=[t[0] for t in TUNING])
def test_allocated_refuses_tuning_without_allocation(annotations: dict[str, str]) -> None:
    with pytest.raises(PolicyError) as e:
        authorize(parse_request(annotations, {}), None, ALLOCATED)
    assert str(e.value).startswith("tuning (")
    assert f"add resources.limits ({BOTH}) to the container" in str(e.value)


ANY_ASKS = [
    ("gpus all", {A + "gpus": "all"}, {}),
    ("gpus count", {A + "gpus": "count:2"}, {}),
    ("nvidia env all", {}, {"NVIDIA_VISIBLE_DEVICES": "all"}),
    ("tuning", {A + "gpus": "0", A + "clocks": "1500", A + "exclusive": "true"}, {}),
]


@pytest.mark.parametrize(("annotations", "env"), [a[1:] for a in ANY_ASKS], ids=[a[0] for a in ANY_ASKS])
def test_any_passes_own_asks(annotations: dict[str, str], env: dict[str, str]) -> None:
    request = parse_request(annotations, env)
    assert authorize(request, None, ANY) is request


WITH_ALLOCATION = [
    ("nothing else", {}, {}),
    ("image env all ignored", {}, {"NVIDIA_VISIBLE_DEVICES": "all"}),
    ("image env of another vendor ignored", {}, {"NVIDIA_VISIBLE_DEVICES": U1, "AMD_VISIBLE_DEVICES": "0"}),
    ("gpus none", {A + "gpus": "none"}, {}),
]


@pytest.mark.parametrize("config", [ANY, ALLOCATED], ids=["any", "allocated"])
@pytest.mark.parametrize(("annotations", "env"), [w[1:] for w in WITH_ALLOCATION], ids=[w[0] for w in WITH_ALLOCATION])
def test_allocation_is_exactly_what_is_granted(annotations: dict[str, str], env: dict[str, str],
                                               config: Config) -> None:
    request = parse_request({A + "allocation": ID, **annotations}, env)
    out = authorize(request, WHOLE, config)
    assert out.selections == (Selection(vendor="nvidia", devices=(U0, U1), source=f"{A}allocation", raw=ID),)
    assert out.allocation == ID


@pytest.mark.parametrize("config", [ANY, ALLOCATED], ids=["any", "allocated"])
def test_own_gpus_next_to_allocation_refused(config: Config) -> None:
    request = parse_request({A + "allocation": ID, A + "gpus": "0"}, {})
    with pytest.raises(PolicyError) as e:
        authorize(request, WHOLE, config)
    assert str(e.value) == (f"{A}gpus='0' next to the kubelet's allocation (nvidia.com/gpu: {U0}, {U1}): a pod gets "
                            f"the GPUs its resources.limits asked for; drop {A}gpus")


REPLICAS = from_table({"policy": {"requests": "allocated"}, "kubernetes": {"replicas": 4}}, "/x")
MPS_NODE = from_table({"policy": {"requests": "allocated"}, "kubernetes": {"replicas": 4, "sharing": "mps"}}, "/x")
MPS_SHARE = Allocation(id=ID, resource="nvidia.com/gpu", vendor="nvidia", gpus=(U0,), devices=(f"{U0}::0",),
                       shared=True, created=100.0, expires=3700.0, claimed_by="pod/main", container="c1",
                       mps_threads=25)

# (id, allocation, the pod's annotations, the setting the refusal names, the kind of share it names)
SHARE_REFUSALS = [
    ("exclusive on a time-sliced share", SHARED, {A + "exclusive": "true"}, f"{A}exclusive", "a time-sliced share"),
    ("exclusive-process on a time-sliced share", SHARED, {A + "compute-mode": "exclusive-process"},
     f"{A}compute-mode", "a time-sliced share"),
    ("prohibited on a time-sliced share", SHARED, {A + "compute-mode": "prohibited"}, f"{A}compute-mode",
     "a time-sliced share"),
    ("default compute mode too", SHARED, {A + "compute-mode": "default"}, f"{A}compute-mode", "a time-sliced share"),
    ("clocks on a time-sliced share", SHARED, {A + "clocks": "1500"}, f"{A}clocks", "a time-sliced share"),
    ("power on a time-sliced share", SHARED, {A + "power-limit": "200"}, f"{A}power-limit", "a time-sliced share"),
    ("fan on a time-sliced share", SHARED, {A + "fan": "80"}, f"{A}fan", "a time-sliced share"),
    ("fan auto too", SHARED, {A + "fan": "auto"}, f"{A}fan", "a time-sliced share"),
    ("mps on a time-sliced share", SHARED, {A + "mps": "true"}, f"{A}mps", "a time-sliced share"),
    ("exclusive on an MPS share", MPS_SHARE, {A + "exclusive": "true"}, f"{A}exclusive",
     "an MPS share (25% of its threads)"),
    ("compute mode on an MPS share", MPS_SHARE, {A + "compute-mode": "exclusive-process"}, f"{A}compute-mode",
     "an MPS share (25% of its threads)"),
    ("clocks on an MPS share", MPS_SHARE, {A + "clocks": "1500"}, f"{A}clocks", "an MPS share (25% of its threads)"),
]


@pytest.mark.parametrize(("alloc", "annotations", "setting", "share"), [r[1:] for r in SHARE_REFUSALS],
                         ids=[r[0] for r in SHARE_REFUSALS])
def test_a_share_may_not_ask_what_excludes_or_changes_the_other_shares(alloc: Allocation,
                                                                       annotations: dict[str, str], setting: str,
                                                                       share: str) -> None:
    request = parse_request({A + "allocation": ID, **annotations}, {})
    with pytest.raises(PolicyError) as e:
        authorize(request, alloc, REPLICAS)
    message = str(e.value)
    assert message.startswith(f"{setting} on a shared GPU ({share} of {U0}: nvidia.com/gpu is shared between pods")
    assert 'ask for a whole GPU (nodeSelector nvidia.com/gpu.replicas: "1")' in message
    assert message.endswith(f"or drop {setting}") and "\n" not in message


SHARE_ALLOWS = [
    ("nothing", SHARED, {}),
    ("the AMD runtime env", SHARED, {A + "gfx-override": "10.3.0", A + "fine-grain-pcie": "true"}),
    ("an MPS client's own limits", MPS_SHARE, {A + "mps": "true", A + "mps-threads": "10", A + "mps-memory": "2G"}),
    ("everything on a whole GPU", WHOLE, {A + "exclusive": "true", A + "compute-mode": "exclusive-process",
                                          A + "clocks": "1500", A + "power-limit": "300", A + "fan": "80"}),
]


@pytest.mark.parametrize(("alloc", "annotations"), [r[1:] for r in SHARE_ALLOWS], ids=[r[0] for r in SHARE_ALLOWS])
def test_what_a_share_may_ask(alloc: Allocation, annotations: dict[str, str]) -> None:
    request = parse_request({A + "allocation": ID, **annotations}, {})
    assert authorize(request, alloc, REPLICAS).selections == (Selection(vendor="nvidia", devices=alloc.gpus,
                                                                        source=f"{A}allocation", raw=ID),)


def test_a_shares_refusal_names_the_env_key_it_came_from_on_a_single_host() -> None:
    request = parse_request({A + "allocation": ID}, {"GPUHOOK_COMPUTE_MODE": "prohibited"})
    with pytest.raises(PolicyError, match=r"^GPUHOOK_COMPUTE_MODE on a shared GPU \(a time-sliced share"):
        authorize(request, SHARED, ANY)


def test_tuning_and_capabilities_kept_with_allocation() -> None:
    request = parse_request({A + "allocation": ID, A + "exclusive": "true", A + "power-limit": "300W",
                             A + "capabilities": "compute,video"}, {})
    out = authorize(request, WHOLE, ALLOCATED)
    assert out.tuning == Tuning(power_limit=300, exclusive=True)
    assert out.capabilities == frozenset({"compute", "video"})
    assert out.selections == (Selection(vendor="nvidia", devices=(U0, U1), source=f"{A}allocation", raw=ID),)


def _claim(*devices: ClaimedDevice, name: str = "c") -> PreparedClaim:
    return PreparedClaim(uid=f"uid-{name}", namespace="ns", name=name, devices=devices)


NV0 = ClaimedDevice(request="gpu", device="gpu-0", vendor="nvidia", gpu=U0)
NV1 = ClaimedDevice(request="other", device="gpu-1", vendor="nvidia", gpu=U1)
AMD = ClaimedDevice(request="gpu", device="amdgpu-128", vendor="amd", gpu="0000:80:00.0")


@pytest.mark.parametrize("config", [ANY, ALLOCATED], ids=["any", "allocated"])
def test_dra_claims_give_the_requests_the_container_presents_whatever_the_image_env_says(config: Config) -> None:
    request = parse_request({}, {"NVIDIA_VISIBLE_DEVICES": "all"})
    got = authorize(request, None, config, ((_claim(NV0, NV1, AMD), ("gpu",)),))
    assert [(s.vendor, s.devices) for s in got.selections] == [("nvidia", (U0,)), ("amd", ("0000:80:00.0",))]
    both = authorize(request, None, config, ((_claim(NV0, NV1), ("gpu", "other")),))
    assert [(s.vendor, s.devices) for s in both.selections] == [("nvidia", (U0, U1))]


def test_a_claims_tuning_joins_the_pod_authors_and_must_agree_with_it() -> None:
    tuned = ClaimedDevice(request="gpu", device="gpu-0", vendor="nvidia", gpu=U0, tuning=(("clocks", "1500"),))
    got = authorize(parse_request({A + "power-limit": "250"}, {}), None, ALLOCATED, ((_claim(tuned), ("gpu",)),))
    assert got.tuning.clocks == (1500, 1500) and got.tuning.power_limit == 250
    with pytest.raises(PolicyError, match="claim ns/c asks '1500' and the container's other claims or annotations"):
        authorize(parse_request({A + "clocks": "1200"}, {}), None, ALLOCATED, ((_claim(tuned), ("gpu",)),))


@pytest.mark.parametrize(("annotations", "alloc", "device", "says"), [
    ({A + "gpus": "0"}, None, NV0, "next to DRA claims (ns/c)"),
    ({}, WHOLE, NV0, "a device plugin allocation (nvidia.com/gpu) and DRA claims"),
    ({A + "clocks": "1500"}, None, ClaimedDevice(request="gpu", device="gpu-0", vendor="nvidia", gpu=U0, admin=True),
     "adminAccess"),
], ids=["own gpus", "an allocation too", "tuning an admin's view"])
def test_what_cannot_stand_beside_a_claim(annotations: dict[str, str], alloc: Allocation | None,
                                          device: ClaimedDevice, says: str) -> None:
    with pytest.raises(PolicyError) as e:
        authorize(parse_request(annotations, {}), alloc, ALLOCATED, ((_claim(device), ("gpu",)),))
    assert says in str(e.value)


@pytest.mark.parametrize(("asked", "threads"), [({}, 50), ({A + "mps-threads": "20"}, 20),
                                                ({A + "mps-threads": "90"}, 50)],
                         ids=["the node's share", "less asked", "more asked: the node's"])
def test_an_allocation_shared_through_mps_makes_the_container_an_mps_client(asked: dict[str, str],
                                                                            threads: int) -> None:
    from gpuhook.frozen import replace

    alloc = replace(SHARED, mps_threads=50)
    request = parse_request({A + "allocation": ID, **({A + "mps": "true"} if asked else {}), **asked}, {})
    tuning = authorize(request, alloc, ALLOCATED).tuning
    assert tuning.mps and tuning.mps_threads == threads
    assert not authorize(parse_request({A + "allocation": ID}, {}), SHARED, ALLOCATED).tuning.mps


def _tuned(*tuning: tuple[str, str], share: str = "") -> ClaimedDevice:
    return ClaimedDevice(request="gpu", device="gpu-0", vendor="nvidia", gpu=U0, tuning=tuning, share=share)


# (id, the node's config, the claim's device, the pod's annotations, the setting the refusal names, the share)
SHARED_CLAIMS = [
    ("GpuConfig computeMode on a replicas = 4 node", REPLICAS, _tuned(("compute-mode", "exclusive-process")), {},
     "computeMode in the GpuConfig of claim ns/c", "a time-sliced"),
    ("GpuConfig exclusive on a device with a share id", ALLOCATED, _tuned(("exclusive", "true"), share="s-1"), {},
     "exclusive in the GpuConfig of claim ns/c", "a time-sliced"),
    ("GpuConfig mps on a time-sliced node", REPLICAS, _tuned(("mps", "true")), {},
     "mps in the GpuConfig of claim ns/c", "a time-sliced"),
    ("annotation exclusive beside a shared claim", REPLICAS, NV0, {A + "exclusive": "true"}, f"{A}exclusive",
     "a time-sliced"),
    ("annotation compute mode beside a share id", ALLOCATED, _tuned(share="s-2"), {A + "compute-mode": "prohibited"},
     f"{A}compute-mode", "a time-sliced"),
    ("GpuConfig powerLimit on an MPS node", MPS_NODE, _tuned(("mps", "true"), ("mps-threads", "25"),
                                                              ("power-limit", "200")), {},
     "powerLimit in the GpuConfig of claim ns/c", "an MPS"),
    ("annotation exclusive on an MPS node", MPS_NODE, _tuned(("mps", "true"), ("mps-threads", "25")),
     {A + "exclusive": "true"}, f"{A}exclusive", "an MPS"),
]


@pytest.mark.parametrize(("config", "device", "annotations", "setting", "share"), [c[1:] for c in SHARED_CLAIMS],
                         ids=[c[0] for c in SHARED_CLAIMS])
def test_a_shared_claims_tenant_may_not_ask_what_changes_the_other_shares(config: Config, device: ClaimedDevice,
                                                                         annotations: dict[str, str], setting: str,
                                                                         share: str) -> None:
    with pytest.raises(PolicyError) as e:
        authorize(parse_request(annotations, {}), None, config, ((_claim(device), ("gpu",)),))
    message = str(e.value)
    assert message.startswith(f"{setting} on a shared GPU (claim ns/c holds {share} share of {U0} (device gpu-0)")
    assert message.endswith(f"ask for a whole GPU (a node whose [kubernetes] replicas is 1, or a DeviceClass of whole "
                            f"GPUs), or drop {setting}")


@pytest.mark.parametrize(("config", "device", "annotations"), [
    (MPS_NODE, _tuned(("mps", "true"), ("mps-threads", "25")),
     {A + "mps": "true", A + "mps-memory": "4G", A + "gfx-override": "10.3.0"}),
    (ALLOCATED, _tuned(("compute-mode", "exclusive-process"), ("exclusive", "true")), {A + "clocks": "1500"}),
], ids=["an MPS client's limits on an MPS node", "everything on a whole GPU"])
def test_what_a_claims_tenant_may_ask(config: Config, device: ClaimedDevice, annotations: dict[str, str]) -> None:
    got = authorize(parse_request(annotations, {}), None, config, ((_claim(device), ("gpu",)),))
    assert got.selections[0].devices == (U0,)
