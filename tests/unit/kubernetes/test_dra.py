"""The DRA driver's pure parts: a claim's configuration, what is published for a device, the slices of a pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhook.edits import DeviceNode
from gpuhook.errors import KubernetesError
from gpuhook.host.inventory import Gpu
from gpuhook.kubernetes.dra.config import API_VERSION, KIND, tuning_by_request
from gpuhook.kubernetes.dra.devices import MAX_DEVICES, MAX_FIELDS, device_json, slices
from gpuhook.vendors.contract import DraDevice

DRIVER = "gpu.gpuhook.dev"


def _opaque(source: str = "FromClaim", requests: list[str] | None = None, driver: str = DRIVER,
            **params: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": source, "opaque": {"driver": driver, "parameters": {
        "apiVersion": API_VERSION, "kind": KIND, **params}}}
    if requests is not None:
        entry["requests"] = requests
    return entry


@pytest.mark.parametrize(("configs", "expected"), [
    ([], {"a": {}, "b": {}}),
    ([_opaque(clocks="1500")], {"a": {"clocks": "1500"}, "b": {"clocks": "1500"}}),
    ([_opaque("FromClass", clocks="1200", exclusive=True), _opaque(clocks="1500")],
     {"a": {"clocks": "1500", "exclusive": "true"}, "b": {"clocks": "1500", "exclusive": "true"}}),
    ([_opaque(requests=["b"], powerLimit=250, fan=70)], {"a": {}, "b": {"power-limit": "250", "fan": "70"}}),
    ([_opaque(driver="gpu.nvidia.com", clocks="1500")], {"a": {}, "b": {}}),
], ids=["none", "all requests", "claim over class", "one request", "another driver's"])
def test_a_claims_configuration_by_request(configs: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert tuning_by_request(configs, DRIVER, ["a", "b"]) == expected


@pytest.mark.parametrize(("allocated", "named", "expected"), [
    ("a/large", ["a/large"], {"perf-level": "high"}),
    ("a/small", ["a/large"], {}),
    ("a/small", ["a"], {"perf-level": "high"}),
    ("a/small", None, {"perf-level": "high"}),
], ids=["the subrequest allocated", "another subrequest", "its request", "every request"])
def test_a_first_available_requests_configuration(allocated: str, named: list[str] | None,
                                                  expected: dict[str, str]) -> None:
    """The scheduler allocates one subrequest of a firstAvailable request (results name it a/small): a config
    naming the request holds for it, one naming another subrequest does not."""
    got = tuning_by_request([_opaque(requests=named, perfLevel="high")], DRIVER, [allocated, "b"])
    assert got == {"a": expected, "b": {} if named else {"perf-level": "high"}}


@pytest.mark.parametrize(("entry", "says"), [
    (_opaque(clock="1500"), "unknown field 'clock' in GpuConfig"),
    ({"opaque": {"driver": DRIVER, "parameters": {"apiVersion": "gpu.nvidia.com/v1", "kind": "GpuConfig"}}},
     "gpuhook's driver reads apiVersion resource.gpuhook.dev/v1alpha1"),
    ({"opaque": {"driver": DRIVER, "parameters": ["x"]}}, "opaque parameters must be an object"),
    (_opaque(perfLevel=["high"]), "perfLevel=\\['high'\\]: expected a string"),
], ids=["typo", "another api", "not an object", "a list"])
def test_a_configuration_gpuhook_cannot_read_is_refused_in_one_line(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(KubernetesError, match=says) as e:
        tuning_by_request([entry], DRIVER, ["gpu"])
    assert "config[0] (from the" in str(e.value) and "\n" not in str(e.value)


def _device(attributes: tuple[tuple[str, str | int | bool], ...] = (), capacity: tuple[tuple[str, int], ...] = (),
            versions: tuple[str, ...] = ()) -> DraDevice:
    node = DeviceNode(path="/dev/nvidia3", kind="c", major=195, minor=3, mode=0o666, uid=0, gid=0)
    gpu = Gpu(vendor="nvidia", index=3, uuid="GPU-3", pci="0000:13:00.0", model="H100", nodes=(node,))
    return DraDevice(name="gpu-3", gpu=gpu, kind="gpu", domain="gpu.nvidia.com", attributes=attributes,
                     versions=versions, capacity=capacity)


def test_a_device_carries_gpuhooks_attributes_the_vendors_copies_and_the_standard_ones() -> None:
    d = _device((("type", "gpu"), ("productName", "H100"), ("driverVersion", "535.104.05"),
                 ("cudaComputeCapability", "9.0")), (("memory", 80 << 30),),
                ("driverVersion", "cudaComputeCapability"))
    body, dropped = device_json(d, 1, "pci0000:10")
    a = body["attributes"]
    assert not dropped and body["name"] == "gpu-3"
    assert body["capacity"] == {"memory": {"value": str(80 << 30)}, "gpu.nvidia.com/memory": {"value": str(80 << 30)}}
    assert a["type"] == {"string": "gpu"} and a["gpu.nvidia.com/type"] == {"string": "gpu"}
    assert a["vendor"] == {"string": "nvidia"} and a["index"] == {"int": 3}
    assert a["driverVersion"] == a["gpu.nvidia.com/driverVersion"] == {"version": "535.104.5"}  # semver: no 05
    assert a["cudaComputeCapability"] == {"version": "9.0.0"}
    assert a["resource.kubernetes.io/pciBusID"] == {"string": "0000:13:00.0"}
    assert a["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:10"}
    assert a["resource.kubernetes.io/numaNode"] == {"int": 1}


def test_no_numa_node_is_published_where_the_kernel_says_none_and_a_non_version_is_left_out() -> None:
    body, _ = device_json(_device((("driverVersion", "r550 beta"),), versions=("driverVersion",)), -1, "")
    assert "resource.kubernetes.io/numaNode" not in body["attributes"]
    assert "resource.kubernetes.io/pcieRoot" not in body["attributes"]
    assert "driverVersion" not in body["attributes"]


def test_past_the_apis_32_fields_what_is_left_out_is_never_gpuhooks_own_the_standard_or_the_bare_capacity() -> None:
    many = tuple((f"fact{i}", i) for i in range(20))
    body, dropped = device_json(_device(many, (("memory", 1),)), 0, "pci0000:00")
    assert len(dropped) == 48 - MAX_FIELDS  # 3 own, 20 facts bare and copied, 3 standard, 2 capacities
    assert len(body["attributes"]) + len(body["capacity"]) == MAX_FIELDS
    assert {"type", "vendor", "index", "resource.kubernetes.io/numaNode"} <= set(body["attributes"])
    assert "memory" in body["capacity"] and "gpu.nvidia.com/memory" in dropped


@pytest.mark.parametrize(("count", "expected"), [(0, [0]), (3, [3]), (MAX_DEVICES, [MAX_DEVICES]),
                                                 (MAX_DEVICES + 1, [MAX_DEVICES, 1])])
def test_a_pool_is_split_into_slices_of_at_most_128_devices(count: int, expected: list[int]) -> None:
    out = slices("node-1", DRIVER, [{"name": f"d{i}"} for i in range(count)], 7, {"kind": "Node"})
    assert [len(s["spec"]["devices"]) for s in out] == expected
    assert {(s["spec"]["pool"]["name"], s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"])
            for s in out} == {("node-1", 7, len(expected))}
    assert [s["metadata"]["name"] for s in out] == [f"node-1-{DRIVER}-{n}" for n in range(len(expected))]
    assert all(s["spec"]["nodeName"] == "node-1" and s["metadata"]["ownerReferences"] == [{"kind": "Node"}]
               for s in out)


def test_the_node_plugin_answers_the_kubelet_under_both_service_names(tmp_path: Path) -> None:
    """The registration names v1.DRAPlugin and v1beta1.DRAPlugin; a kubelet of either speaks to the same calls
    (the v1beta1 one by its own method path, as older kubelets do). Real gRPC over a Unix socket."""
    import grpc

    from gpuhook.config import from_table
    from gpuhook.kubernetes.api import dra_pb2, pluginregistration_pb2, pluginregistration_pb2_grpc
    from gpuhook.kubernetes.dra import driver as dra_driver
    from gpuhook.kubernetes.dra import registration as registration_mod
    from gpuhook.kubernetes.dra.state import Preparer

    config = from_table({"state_dir": str(tmp_path / "state")}, str(tmp_path / "config.toml"))
    preparer = Preparer(config, None, DRIVER, "node-1", str(tmp_path / "cdi"),
                        "/bin/gpuhook-hook",  # type: ignore[arg-type]
                        "/bin/gpuhook", checkpoint=str(tmp_path / "plugins" / DRIVER))
    endpoint, registration = str(tmp_path / "plugins" / DRIVER / "dra.sock"), str(tmp_path / "reg.sock")
    servicer = dra_driver.Driver(config, preparer, endpoint, DRIVER)
    server = registration_mod.serve(servicer, endpoint, registration, None)
    try:
        with grpc.insecure_channel(f"unix://{registration}") as channel:
            info = pluginregistration_pb2_grpc.RegistrationStub(channel).GetInfo(pluginregistration_pb2.InfoRequest())
        assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DRIVER, endpoint)
        assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        request = dra_pb2.NodeUnprepareResourcesRequest(claims=[dra_pb2.Claim(namespace="ns", uid="u-1", name="c")])
        with grpc.insecure_channel(f"unix://{endpoint}") as channel:
            for package in ("k8s.io.kubelet.pkg.apis.dra.v1", "k8s.io.kubelet.pkg.apis.dra.v1beta1"):
                call = channel.unary_unary(f"/{package}.DRAPlugin/NodeUnprepareResources",
                                           request_serializer=dra_pb2.NodeUnprepareResourcesRequest.SerializeToString,
                                           response_deserializer=dra_pb2.NodeUnprepareResourcesResponse.FromString)
                answer = call(request, timeout=5)
                assert "u-1" in answer.claims and answer.claims["u-1"].error == ""  # never prepared: nothing to undo
    finally:
        servicer.stop()
        server.stop(0)


def test_a_time_sliced_device_takes_that_many_claims_each_with_its_share_by_default() -> None:
    body, _ = device_json(_device(capacity=(("memory", 80 << 30),)), 0, "", shares=4)
    assert body["allowMultipleAllocations"] is True
    assert body["capacity"]["shares"] == {"value": "4", "requestPolicy": {
        "default": "1", "validRange": {"min": "1", "max": "4"}}}
    assert body["capacity"]["memory"]["requestPolicy"]["default"] == str(20 << 30)
    assert body["capacity"]["gpu.nvidia.com/memory"]["requestPolicy"]["default"] == str(20 << 30)
    whole, _ = device_json(_device(capacity=(("memory", 80 << 30),)), 0, "")
    assert "allowMultipleAllocations" not in whole and whole["capacity"]["memory"] == {"value": str(80 << 30)}


@pytest.mark.parametrize(("table", "keys", "admin", "expected"), [
    ({"replicas": 4, "sharing": "mps"}, {}, False, {"mps": "true", "mps-threads": "25"}),
    ({"replicas": 4, "sharing": "mps"}, {"mps-threads": "10", "clocks": "1500"}, False,
     {"mps": "true", "mps-threads": "10", "clocks": "1500"}),
    ({"replicas": 4, "sharing": "mps"}, {"mps-threads": "60"}, False, {"mps": "true", "mps-threads": "25"}),
    ({"replicas": 4, "sharing": "mps"}, {}, True, {}),  # adminAccess is never an MPS client
    ({"replicas": 4}, {}, False, {}),  # time-slicing
    ({"replicas": 1, "sharing": "mps"}, {}, False, {}),  # whole GPUs
], ids=["the node's share", "less asked", "more asked", "admin", "time-slicing", "whole"])
def test_a_claim_on_a_gpu_shared_through_mps_is_an_mps_client(tmp_path: Path, table: dict[str, Any],
                                                              keys: dict[str, str], admin: bool,
                                                              expected: dict[str, str]) -> None:
    from gpuhook.config import from_table
    from gpuhook.kubernetes.dra.state import Preparer

    config = from_table({"state_dir": str(tmp_path / "state"), "kubernetes": table}, str(tmp_path / "config.toml"))
    preparer = Preparer(config, None, DRIVER, "node-1", str(tmp_path / "cdi"),
                        "/bin/gpuhook-hook",  # type: ignore[arg-type]
                        "/bin/gpuhook", checkpoint=str(tmp_path / "plugins" / DRIVER))
    assert preparer._shared(keys, _device(), admin) == (expected or keys)


@pytest.mark.parametrize("kind", ["nvidia", "amd"])
def test_a_driver_in_a_container_of_its_own_names_the_nodes_paths_in_its_cdi_specs(tmp_path: Path,
                                                                                  kind: str) -> None:
    """The chart's driver sees the node's / at a mount of its own (--node-root; host_root under it): the CDI spec
    the node's engine reads names the node's device nodes and driver files, and the hooks of the build the
    installer copied to the node (--node-bin-dir), never the container's paths."""
    import json

    from gpuhook.apply import claims
    from gpuhook.config import from_table
    from gpuhook.host.root import Root
    from gpuhook.kubernetes.dra.loop import _hooks
    from gpuhook.kubernetes.dra.state import Preparer
    from gpuhook.kubernetes.dra.taints import Xids, describe
    from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
    from gpuhook.testing.simulate import HostSpec, build_host
    from gpuhook.vendors.discover import discover, identified

    node = tmp_path / "node"  # the node's / as the container sees it
    build_host(str(node / "gpuhost"), HostSpec(nvidia=1) if kind == "nvidia" else HostSpec(amd=1))
    here = tmp_path / "image" / "bin"  # this build, in the image: its native front ends are built
    here.mkdir(parents=True)
    for name in ("gpuhook", "gpuhook-hook", "gpuhook-createhook"):
        (here / name).touch(mode=0o755)
    hook, gpuhook_bin, helper = _hooks(str(here), "/var/lib/gpuhook/bin")
    assert (hook, gpuhook_bin, helper) == ("/var/lib/gpuhook/bin/gpuhook-hook", "/var/lib/gpuhook/bin/gpuhook",
                                           "/var/lib/gpuhook/bin/gpuhook-hook")  # the cache's hook: the front end
    config = from_table({"host_root": str(node / "gpuhost"), "state_dir": str(tmp_path / "state")},
                        "/etc/gpuhook/config.toml")
    root = Root(config.host_root)
    inventory = identified(root, discover(root))
    devices = [d for d, _ in describe(inventory, root, Xids(), {})]
    d = devices[0]
    checkpoint = tmp_path / "plugins" / DRIVER
    claims.save(str(checkpoint), PreparedClaim(uid="uid-1", namespace="ns", name="claim", devices=(
        ClaimedDevice(request="gpu", device=d.name, vendor=kind, gpu=d.gpu.key()),)))
    preparer = Preparer(config, None, DRIVER, "node-1", str(tmp_path / "cdi"), hook, gpuhook_bin,
                        helper,  # type: ignore[arg-type]
                        checkpoint=str(checkpoint), node_root=str(node))
    assert preparer.restore({d.name: d}, inventory) == (["ns/claim (uid-1)"], [])
    edits = json.loads(Path(preparer.spec_path("uid-1")).read_text())["devices"][0]["containerEdits"]
    named = [n["hostPath"] for n in edits["deviceNodes"]] + [m["hostPath"] for m in edits.get("mounts", [])]
    assert named and all(p.startswith("/gpuhost/") for p in named), named
    assert {h["path"] for h in edits["hooks"]} <= {hook, helper} and any(h["path"] == hook for h in edits["hooks"])
    assert all("GPUHOOK_CONFIG=/etc/gpuhook/config.toml" in h.get("env", []) for h in edits["hooks"]
               if h["path"] == hook)
    assert (kind != "nvidia") or any(p.startswith("/gpuhost/usr/lib") for p in named)  # the driver's libraries


def test_a_host_root_outside_the_nodes_mount_is_refused(tmp_path: Path) -> None:
    from gpuhook.errors import DiscoveryError
    from gpuhook.kubernetes.dra.cdi import on_node

    (tmp_path / "node" / "sim").mkdir(parents=True)
    assert on_node(str(tmp_path / "node" / "sim"), str(tmp_path / "node")) == "/sim"
    assert on_node(str(tmp_path / "node"), str(tmp_path / "node")) == "/"
    assert on_node("/anything", "/") == "/anything"
    with pytest.raises(DiscoveryError, match="where the node's / is mounted"):
        on_node(str(tmp_path / "elsewhere"), str(tmp_path / "node"))


@pytest.mark.parametrize(("table", "keys", "refused"), [
    ({"replicas": 2}, {"exclusive": "true"}, "exclusive in the GpuConfig on a shared GPU"),
    ({"replicas": 2}, {"compute-mode": "exclusive-process"}, "computeMode in the GpuConfig on a shared GPU"),
    ({"replicas": 2}, {"clocks": "1500"}, "clocks in the GpuConfig on a shared GPU"),
    ({"replicas": 4, "sharing": "mps"}, {"power-limit": "300", "mps": "true", "mps-threads": "25"},
     "powerLimit in the GpuConfig on a shared GPU"),
    ({"replicas": 4, "sharing": "mps"}, {"mps": "true", "mps-threads": "25"}, ""),
    ({"replicas": 1}, {"exclusive": "true", "clocks": "1500"}, ""),
], ids=["exclusive on a time-sliced share", "compute mode", "clocks", "power on an MPS share", "the MPS share's own",
        "a whole GPU's"])
def test_a_claim_is_refused_at_prepare_what_a_share_may_not_ask(tmp_path: Path, table: dict[str, Any],
                                                                keys: dict[str, str], refused: str) -> None:
    """#43 item 1, where the request is made: NodePrepareResources refuses (the pod's events show it) a share's
    GpuConfig that would exclude or change the GPU's other shares, by its field's name, as the runtime would at
    each start; a whole GPU's and an MPS client's own settings are prepared."""
    from gpuhook.config import from_table
    from gpuhook.errors import KubernetesError
    from gpuhook.host.inventory import Inventory
    from gpuhook.kubernetes.dra.state import Preparer
    from gpuhook.plan.authority import ClaimedDevice

    config = from_table({"state_dir": str(tmp_path / "state"), "kubernetes": table}, str(tmp_path / "config.toml"))
    preparer = Preparer(config, None, DRIVER, "node-1", str(tmp_path / "cdi"),
                        "/bin/gpuhook-hook",  # type: ignore[arg-type]
                        "/bin/gpuhook", checkpoint=str(tmp_path / "plugins" / DRIVER))
    claimed = ClaimedDevice(request="gpu", device="gpu-3", vendor="nvidia", gpu="GPU-3", admin=False,
                            tuning=tuple(sorted(keys.items())))
    inventory = Inventory(str(tmp_path), ())
    if not refused:
        preparer._check_tuning("team-a", "c1", claimed, _device(), inventory)
        return
    with pytest.raises(KubernetesError) as e:
        preparer._check_tuning("team-a", "c1", claimed, _device(), inventory)
    assert str(e.value).startswith("claim team-a/c1, request gpu: ") and refused in str(e.value), e.value
    assert "\n" not in str(e.value)


_FIVE_THOUSAND = "1" * 5000


@pytest.mark.parametrize(("field", "value", "says"), [
    ("mpsActiveThreadPercentage", "\uff11\uff12", "1-100"),  # fullwidth 12: str.isdigit takes it, int() reads 12
    ("mpsActiveThreadPercentage", "\u0663", "1-100"),  # Arabic-Indic three
    ("mpsActiveThreadPercentage", _FIVE_THOUSAND, "1-100"),  # int() would exceed the 4,300 digits it reads
    ("mpsActiveThreadPercentage", "0" * 64, "1-100"),  # zeros: a number in range once int() had read them
    ("mpsActiveThreadPercentage", 0, "1-100"),
    ("mpsActiveThreadPercentage", 101, "1-100"),
    ("mpsActiveThreadPercentage", 50.0, "1-100"),
    ("mpsActiveThreadPercentage", True, "1-100"),
    ("powerLimit", -250, "watts, a whole number 1-10000"),
    ("powerLimit", "-250", "watts, a whole number 1-10000"),
    ("powerLimit", 10**5000, "watts, a whole number 1-10000"),  # a huge integer, never converted to text
    ("powerLimit", "250.5", "watts, a whole number 1-10000"),
    ("powerLimit", 250.5, "watts, a whole number 1-10000"),
    ("fan", "\uff11\uff10\uff10", "fan speed in percent, a whole number 0-100"),
    ("fan", 101, "fan speed in percent, a whole number 0-100"),
    ("clocks", "\uff11\uff15\uff10\uff10", "1-100000"),
    ("clocks", "1500-1200", "a range's upper end in MHz, a whole number 1500-100000"),
    ("clocks", "1200-\u0663", "1200-100000"),
    ("clocks", 1500.0, "1-100000"),
    ("mpsPinnedMemoryLimit", "\uff18G", "in G, a whole number 1-16384"),
    ("mpsPinnedMemoryLimit", "99999999999G", "in G, a whole number 1-16384"),
    ("mpsPinnedMemoryLimit", 8, "1M-16T"),
], ids=["fullwidth", "arabic-indic", "5000 digits", "64 zeros", "zero", "over 100", "float", "bool", "negative",
        "negative text", "huge integer", "float text", "watts float", "fan fullwidth", "fan over 100",
        "clocks fullwidth", "clocks range reversed", "clocks range arabic-indic", "clocks float", "memory fullwidth",
        "memory too much", "memory without unit"])
def test_a_gpuconfig_number_is_ascii_digits_in_its_range_or_refused_by_name(field: str, value: object,
                                                                            says: str) -> None:
    """#43 item 9: every number of a GpuConfig through one strict parser; a bad value gets the driver's own line
    naming the claim, the entry, the field and the range, never Python's text (int()'s "invalid literal", the
    4,300-digit limit's "Exceeds the limit")."""
    with pytest.raises(KubernetesError) as e:
        tuning_by_request([_opaque(**{field: value})], DRIVER, ["gpu"], "team-a/train")
    text = str(e.value)
    assert text.startswith(f"claim team-a/train, config[0] (from the claim): {field}="), text
    assert says in text and "\n" not in text and len(text) < 300, text
    assert not any(p in text for p in ("invalid literal", "Exceeds the limit", "int()", "Traceback")), text


@pytest.mark.parametrize(("field", "value", "key", "expected"), [
    ("mpsActiveThreadPercentage", "50", "mps-threads", "50"),
    ("mpsActiveThreadPercentage", "50%", "mps-threads", "50"),
    ("powerLimit", 250, "power-limit", "250"),
    ("powerLimit", "300W", "power-limit", "300"),
    ("fan", "auto", "fan", "auto"),
    ("fan", 0, "fan", "0"),
    ("clocks", "1200-1500", "clocks", "1200-1500"),
    ("clocks", 1500, "clocks", "1500"),
    ("mpsPinnedMemoryLimit", "8G", "mps-memory", "8G"),
    ("mpsPinnedMemoryLimit", "512mb", "mps-memory", "512M"),
], ids=["threads", "threads percent", "watts", "watts with unit", "fan auto", "fan stopped", "clock range",
        "clock number", "memory", "memory lower case"])
def test_a_gpuconfig_number_goes_on_in_the_annotations_form(field: str, value: object, key: str,
                                                            expected: str) -> None:
    assert tuning_by_request([_opaque(**{field: value})], DRIVER, ["gpu"]) == {"gpu": {key: expected}}
