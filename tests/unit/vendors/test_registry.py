"""A fourth vendor registered from the tests alone (its GPU path part and, as attributes, its other parts) goes
through request -> discovery -> plan -> spec and CDI, tuning and its backend, partition layouts, the image's stack
check, labels, the device plugin's and DRA's devices, doctor, the simulator and the exporter, without any other module
knowing its name; one without the other parts gets the documented defaults; an unknown vendor fails loudly."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from gpuhook.apply.cdi import build
from gpuhook.apply.spec import apply_edits
from gpuhook.config import Policy
from gpuhook.edits import DeviceNode, Edits
from gpuhook.errors import RequestError, TuningError
from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.host.root import Root
from gpuhook.plan.select import plan_edits, select_all
from gpuhook.plan.tuning import gpus_in_spec, settings_for
from gpuhook.request.tuning import Tuning
from gpuhook.testing.bundle import oci_config
from gpuhook.vendors import registry
from gpuhook.vendors.contract import Setting
from gpuhook.vendors.discover import discover
from gpuhook.vendors.labels import labels
from tests.unit.parsing import parse_request


class Toy:
    """A vendor whose GPUs are /dev/toy<N>, listed in /sys/class/toy/toy<N>/uuid: the GPU path's part alone."""

    NAME = "toy"
    LABEL = "Toy"
    ENV_KEY = "TOY_VISIBLE_DEVICES"
    NONE_MEANS_DRIVER = False
    CAPABILITIES_ENV = None
    CDI_KIND = "toy.example/gpu"
    DOCKER_GPUS_HOOK = None
    STACK = ""

    def parse_id(self, item: str) -> str | None:
        return item.upper() if item.upper().startswith("TOY-") and item[4:].isalnum() else None

    def discover(self, root: Root) -> VendorInventory | None:
        names = [n for n in root.listdir("/sys/class/toy") if n.startswith("toy")]
        if not names:
            return None
        gpus = []
        for i, name in enumerate(names):
            node = read_node(root, f"/dev/{name}")
            uuid = root.read_text(f"/sys/class/toy/{name}/uuid").strip()
            gpus.append(Gpu(vendor=self.NAME, index=i, uuid=uuid, pci=f"0000:{0x40 + i:02x}:00.0", model="Toy 1",
                            nodes=(node,) if node else ()))
        return VendorInventory(vendor=self.NAME, driver_version="1.0", gpus=tuple(gpus), shared_nodes=())

    def identify(self, root: Root, inv: VendorInventory, idents: Sequence[str] | None) -> VendorInventory:
        return inv

    def plan(self, inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str], host_base: str) -> Edits:
        return Edits.for_nodes(n for g in gpus for n in g.nodes)

    def claims(self, gpu: Gpu) -> tuple[DeviceNode, ...]:
        return gpu.nodes

    def hardening(self, policy: Policy) -> Edits:
        return Edits()

    def procfs_files(self, root: Root, gpus: Sequence[Gpu], policy: Policy) -> None:
        return None


class ToyTuning:
    """The toy's tuning part: clocks only, kept in a dict."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def settings(self, tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
        return (Setting(vendor="toy", gpu=gpu.uuid, index=gpu.index, pci=gpu.pci, device=gpu.uuid, name="clocks",
                        value=str(tuning.clocks)),) if tuning.clocks else ()

    def sharing(self, tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
        return (), Edits()

    def repartition(self, root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
        return "" if dry_run else f"toy {gpu.index} laid out"

    def backend(self, root: Root, state_dir: str) -> object:
        values = self.values

        class Backend:
            def get(self, s: Setting) -> str:
                return values.get(s.key, "unlocked")

            def set(self, s: Setting, value: str) -> None:
                values[s.key] = value

            def check(self, s: Setting) -> None:
                if s.value == "refused":
                    raise TuningError(f"toy GPU cannot take {s.key}={s.value}")

            def close(self) -> None:
                pass

        return Backend()


class ToyTelemetry:
    def telemetry(self, root: Root, inv: VendorInventory) -> object:
        from gpuhook.vendors.contract import Reading

        class Source:
            broken = False

            def read(self, gpus: Sequence[Gpu]) -> dict[str, Reading]:
                return {g.uuid: Reading(power=10.0 + g.index) for g in gpus}

            def close(self) -> None:
                pass

        return Source()


class ToyKubernetes:
    RESOURCE = "toy.example/gpu"
    SLICE_RESOURCE = "toy.example/slice-{profile}"
    SHARING = ("time-slicing",)

    def labels(self, inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
               sharing: str = "time-slicing") -> dict[str, str]:
        return {"toyness": "high", "toy.example/gpu.replicas": str(replicas)}

    def dra_devices(self, inv: VendorInventory, root: Root) -> tuple[object, ...]:
        from gpuhook.vendors.contract import DraDevice

        return tuple(DraDevice(name=f"toy-{g.index}", gpu=g, kind="gpu", domain="gpu.toy.example",
                               attributes=(("productName", g.model),), capacity=(("memory", 1 << 30),))
                     for g in inv.gpus)


class ToyStack:
    STACK = "ToyKit"
    IMAGE = True

    def release_of_driver(self, driver: str) -> str | None:
        return None

    def min_driver(self, release: str) -> str | None:
        return None

    def check_release(self, inv: VendorInventory, release: str, strict: bool) -> str | None:
        from gpuhook.vendors.stack_window import check

        return check("Toy", self.STACK, inv, release, self.stack_window(inv), strict)

    def image_stack(self, image: object, notes: list[str]) -> str | None:
        return "2.0"

    def stack_window(self, inv: VendorInventory) -> tuple[str, str] | None:
        return ("1.0", "1.9")


class ToySim:
    STATE = ""
    REACTIONS: tuple[str, ...] = ()
    DEMO = "ls -l /dev/toy*"
    OPTIONS: type = object  # no settings of its own

    def react(self, root: str, spec: object, what: str, index: int, value: str) -> None:
        raise NotImplementedError

    def settle(self, root: str) -> None:
        pass

    def build(self, root: str, spec: object, count: int) -> None:
        for i in range(count):
            os.makedirs(f"{root}/sys/class/toy/toy{i}", exist_ok=True)
            Path(f"{root}/sys/class/toy/toy{i}/uuid").write_text(f"TOY-{i:04d}\n")
            os.makedirs(f"{root}/dev", exist_ok=True)
            os.mknod(f"{root}/dev/toy{i}", stat.S_IFCHR | 0o660, os.makedev(240, i))
            os.chown(f"{root}/dev/toy{i}", 0, 109)


class ToyDoctor:
    def checks(self, inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
        return (("warn", f"{len(inv.gpus)} toys are toys", "play"),)


class FullToy(Toy):
    """The toy with every part, as attributes named after them (registry.part's convention for a registered
    vendor)."""

    STACK = "ToyKit"
    tuning = ToyTuning()
    telemetry = ToyTelemetry()
    kubernetes = ToyKubernetes()
    stack = ToyStack()
    sim = ToySim()
    doctor = ToyDoctor()


@pytest.fixture
def toy_host(tmp_path: Path) -> Iterator[Root]:
    registry.register(FullToy())  # type: ignore[arg-type]  # duck-typed, as a plugin's would be
    try:
        from gpuhook.testing.simulate import HostSpec, build_host

        yield Root(build_host(str(tmp_path / "host"), HostSpec(others=(("toy", 2),))))
    finally:
        registry.unregister("toy")


def test_a_toy_vendor_from_env_to_spec(toy_host: Root) -> None:
    inventory = discover(toy_host)
    assert [v.vendor for v in inventory.vendors] == ["toy"]
    request = parse_request({}, {"TOY_VISIBLE_DEVICES": "1"})
    assert request.selections[0].vendor == "toy"
    spec = apply_edits(oci_config(["true"], env={"TOY_VISIBLE_DEVICES": "1"}), plan_edits(request, inventory),
                       "/b/rootfs", "/sbin/ldconfig")
    assert [(d["path"], d["major"], d["minor"], d["gid"]) for d in spec["linux"]["devices"]] == [("/dev/toy1", 240, 1,
                                                                                                   109)]
    assert {"allow": True, "type": "c", "major": 240, "minor": 1, "access": "rwm"} in spec["linux"]["resources"][
        "devices"]
    assert spec["process"]["user"]["additionalGids"] == [109]


def test_a_toy_vendor_by_annotation_its_own_ids_and_tuning(toy_host: Root) -> None:
    inventory = discover(toy_host)
    named = parse_request({"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": "toy"}, {})
    assert [g.index for _, gpus in select_all(named, inventory) for g in gpus] == [0, 1]
    by_uuid = parse_request({"gpuhook.dev/gpus": "toy-0001", "gpuhook.dev/clocks": "900"}, {})
    selected = select_all(by_uuid, inventory)
    assert [(inv.vendor, g.uuid) for inv, gpus in selected for g in gpus] == [("toy", "TOY-0001")]
    assert [s.vendor for s in settings_for(by_uuid.tuning, selected)] == ["toy"]
    spec_devices = [{"type": "c", "major": 240, "minor": 0}]
    assert [g.uuid for _, gpus in gpus_in_spec(spec_devices, inventory) for g in gpus] == ["TOY-0000"]


def test_a_toy_vendor_in_cdi_and_labels(toy_host: Root) -> None:
    inventory = discover(toy_host)
    toy = registry.get("toy")
    spec, _ = build(toy, inventory.vendor("toy"), inventory.root, frozenset(), "/g", "/c")  # type: ignore[arg-type]
    assert spec["kind"] == "toy.example/gpu" and spec["containerEdits"]["env"] == ["TOY_VISIBLE_DEVICES=void"]
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "TOY-0000", "TOY-0001", "all"]
    assert spec["cdiVersion"] == "0.7.0"  # its nodes need group 109
    assert labels(inventory, toy_host, 3) == {"gpuhook-toy.present": "true", "gpuhook-toy.count": "2",
                                              "gpuhook-toy.driver": "1.0", "gpuhook-toy.toyness": "high",
                                              "toy.example/gpu.replicas": "3",
                                              "gpuhook.feature.node.kubernetes.io/accelerator": "toy",
                                              "gpuhook.feature.node.kubernetes.io/accelerator.toy": "true"}


def test_a_toy_vendor_in_the_exporter(toy_host: Root, tmp_path: Path) -> None:
    from gpuhook.metrics.families import families
    from gpuhook.metrics.gather import gather
    from gpuhook.metrics.telemetry import Sessions

    served = {f.name: [(s.labels, s.value) for s in f.samples]
              for f in families(gather(toy_host, str(tmp_path / "state"), Sessions(toy_host)))}
    assert [labels["uuid"] for labels, _ in served["gpuhook_gpu_info"]] == ["TOY-0000", "TOY-0001"]
    assert served["gpuhook_gpu_healthy"] == [({"vendor": "toy", "uuid": "TOY-0000"}, 1),
                                             ({"vendor": "toy", "uuid": "TOY-0001"}, 1)]
    assert served["gpuhook_gpu_power_watts"] == [({"vendor": "toy", "uuid": "TOY-0000"}, 10.0),
                                                 ({"vendor": "toy", "uuid": "TOY-0001"}, 11.0)]


def test_a_toy_vendor_in_tuning_partitions_and_the_stack_check(toy_host: Root, tmp_path: Path) -> None:
    from gpuhook.errors import PolicyError
    from gpuhook.host.facts import HostFacts
    from gpuhook.plan import compat
    from gpuhook.tuning.backends import BackendSet

    inventory = discover(toy_host)
    inv = inventory.vendor("toy")
    assert inv is not None
    (setting,) = settings_for(Tuning(clocks=(900, 900)), [(inv, inv.gpus[:1])])
    with BackendSet(toy_host, str(tmp_path)) as backends:
        backends("toy").set(setting, "900-900")
        assert backends("toy").get(setting) == "900-900"
    assert registry.tuning("toy").repartition(toy_host, inv.gpus[0], {}) == "toy 0 laid out"
    facts = HostFacts(image_read=True, image_stacks=(("toy", "2.0"),))
    verdict = compat.check(((inv, inv.gpus),), {}, {}, facts)
    assert verdict.warnings == ("the image ships ToyKit 2.0 but the host's Toy driver 1.0 runs ToyKit 1.0 to 1.9: "
                                "use an image with ToyKit 1.0-1.9 or a host driver that runs 2.0",)
    with pytest.raises(PolicyError, match=r"ToyKit 2\.0"):
        compat.check(((inv, inv.gpus),), {}, {}, facts, rocm_policy="strict")


def test_a_toy_vendor_in_dra_and_doctor(toy_host: Root, tmp_path: Path) -> None:
    from gpuhook.cli.doctor import run_checks
    from gpuhook.config import Config
    from gpuhook.kubernetes.dra.devices import device_json
    from gpuhook.kubernetes.dra.taints import Xids, describe

    inventory = discover(toy_host)
    described = describe(inventory, toy_host, Xids(), {})
    assert [(d.name, found) for d, found in described] == [("toy-0", ()), ("toy-1", ())]
    devices = [d for d, _ in described]
    published, _ = device_json(devices[0], -1, "")
    assert published["attributes"]["gpu.toy.example/productName"] == {"string": "Toy 1"}
    assert published["capacity"]["memory"] == {"value": str(1 << 30)}
    found = run_checks(Config(path="c", host_root=toy_host.base, state_dir=str(tmp_path)))
    assert ("warn", "2 toys are toys", "play") in [(f.level, f.what, f.fix) for f in found]


def test_a_vendor_without_parts_gets_the_defaults(tmp_path: Path) -> None:
    from gpuhook.errors import DiscoveryError, SimulatorError, TuningError
    from gpuhook.testing.simulate import HostSpec, build_host

    class Bare(Toy):
        NAME = "bare"
        LABEL = "Bare"
        ENV_KEY = "BARE_VISIBLE_DEVICES"

    registry.register(Bare())  # type: ignore[arg-type]
    try:
        gpu = Gpu(vendor="bare", index=0, uuid="BARE-0", pci="0000:40:00.0", model="Bare 1", nodes=())
        inv = VendorInventory(vendor="bare", driver_version="1.0", gpus=(gpu,), shared_nodes=())
        with pytest.raises(RequestError, match=r"Bare GPU 0 takes no gpuhook\.dev/ tuning"):
            registry.tuning("bare").settings(Tuning(clocks=(900, 900)), gpu)
        assert registry.tuning("bare").settings(Tuning(exclusive=True), gpu) == ()
        with pytest.raises(RequestError, match="NVIDIA's MPS, but these are Bare GPUs"):
            registry.tuning("bare").sharing(Tuning(mps=True), [gpu], "/run/mps")
        with pytest.raises(TuningError, match="no tuning backend for Bare GPUs"):
            registry.tuning("bare").backend(Root("/"), str(tmp_path))
        with pytest.raises(DiscoveryError, match="no telemetry of Bare GPUs"):
            registry.telemetry("bare").telemetry(Root("/"), inv)
        kube = registry.kubernetes("bare")
        assert (kube.labels(inv, Root("/"), 2), kube.dra_devices(inv, Root("/")), kube.SHARING, kube.RESOURCE) == (
            {}, (), ("time-slicing",), "bare.com/gpu")
        assert registry.stack("bare").STACK == "" and registry.doctor("bare").checks(inv) == ()
        with pytest.raises(SimulatorError, match="cannot make Bare GPUs"):
            build_host(str(tmp_path / "host"), HostSpec(others=(("bare", 1),)))
    finally:
        registry.unregister("bare")


def test_a_hosts_settings_are_the_vendors_sim_parts(tmp_path: Path) -> None:
    """HostSpec takes each vendor's count by its name and each vendor's settings by the names of its sim part's
    OPTIONS; a name no vendor takes is refused before anything is built, and a marker keeps them all."""
    from gpuhook.errors import SimulatorError
    from gpuhook.testing.simulate import HostSpec, build_host, spec_of

    assert set(registry.sim("nvidia").OPTIONS._fields) >= {"nvidia_driver", "mig"}  # type: ignore[attr-defined]
    assert "nvidia_driver" not in HostSpec.__slots__  # no vendor's setting is the simulator's own
    with pytest.raises(SimulatorError, match="has no bogus_driver"):
        build_host(str(tmp_path / "bad"), HostSpec(nvidia=1, bogus_driver="1.0"))
    assert not (tmp_path / "bad").exists()
    root = build_host(str(tmp_path / "host"), HostSpec(nvidia=1, amd=1, nvidia_driver="570.86.10", amd_driver=None))
    assert Path(root, "proc/driver/nvidia/version").read_text().split()[7] == "570.86.10"
    assert not Path(root, "sys/module/amdgpu/version").exists()  # the in-kernel driver, as asked
    assert spec_of(root) == HostSpec(nvidia=1, amd=1, nvidia_driver="570.86.10", amd_driver=None)


def test_an_attribute_that_is_no_part_is_refused() -> None:
    class OldStyle(Toy):
        NAME = "old"
        ENV_KEY = "OLD_VISIBLE_DEVICES"

        def telemetry(self, root: Root, inv: VendorInventory) -> object:  # the wide protocol's method, not a part
            raise NotImplementedError

    with pytest.raises(ValueError, match="'telemetry' is not a telemetry part"):
        registry.register(OldStyle())  # type: ignore[arg-type]
    assert "old" not in registry.names()


def test_only_the_registry_names_the_builtin_parts() -> None:
    assert registry.tuning("nvidia").__name__ == "gpuhook.vendors.nvidia.tuning"  # type: ignore[attr-defined]
    assert registry.stack("hygon").STACK == "DTK"
    assert (registry.stack("nvidia").STACK, registry.stack("amd").STACK) == ("CUDA", "ROCm")
    assert registry.kubernetes("amd").SLICE_RESOURCE == "amd.com/{profile}"
    assert registry.resources() == (("nvidia", "nvidia.com/gpu"), ("amd", "amd.com/gpu"), ("hygon", "hygon.com/dcu"))
    assert registry.resource("amd", (("amd", "example.com/mi300x"),)) == "example.com/mi300x"


def test_an_unknown_vendor_fails_loudly() -> None:
    with pytest.raises(RequestError, match="expected one of nvidia, amd"):
        parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "toy"}, {})
    with pytest.raises(KeyError, match="unknown GPU vendor 'toy'"):
        registry.get("toy")


def test_a_vendor_must_be_seen_by_the_pass_through_markers() -> None:
    class Hidden(Toy):
        NAME = "hidden"
        ENV_KEY = "HIDDEN_GPUS"

    with pytest.raises(ValueError, match="must end in _VISIBLE_DEVICES"):
        registry.register(Hidden())  # type: ignore[arg-type]
    assert "hidden" not in registry.names()
