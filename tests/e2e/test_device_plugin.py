"""The real `gpuhook device-plugin` process against a kubelet played over the device plugin API: registration,
ListAndWatch with health, preferred allocation, Allocate's records, kubelet restarts and SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuhook.apply import allocations
from gpuhook.testing.simulate import HostSpec, build_host
from tests.support.kubelet import FakeKubelet, PluginClient

from . import conftest


@dataclass
class Node:
    host: str
    state: str
    kubelet: FakeKubelet
    plugin: subprocess.Popen[str]
    log: Path


def _start(tmp: Path, spec: HostSpec, extra: str = "") -> Node:
    host = build_host(str(tmp / "host"), spec)
    config = tmp / "gpuhook.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp}/state"\n[kubernetes]\nhealth_interval = 0.5\n'
                      + extra)
    kubelet = FakeKubelet(str(tmp / "device-plugins")).start()
    log = tmp / "plugin.log"
    plugin = subprocess.Popen([conftest.GPUHOOK, "device-plugin", "--kubelet-dir", kubelet.directory],
                              env={**os.environ, "GPUHOOK_CONFIG": str(config)}, stdout=subprocess.DEVNULL,
                              stderr=open(log, "w"), text=True)  # noqa: SIM115 (the process owns it)
    return Node(host, f"{tmp}/state", kubelet, plugin, log)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = _start(tmp_path, HostSpec(nvidia=2, amd=2, numa_nodes=2), "replicas = 2\n")
    yield n
    if n.plugin.poll() is None:
        n.plugin.kill()
        n.plugin.wait(5)
    n.kubelet.stop()


def _client(node: Node, resource: str, count: int = 1) -> PluginClient:
    registration = node.kubelet.wait_registered(resource, count, timeout=20)
    return node.kubelet.plugin(registration).watch()


def test_both_vendors_register_with_shares_numa_and_health(node: Node) -> None:
    for resource, endpoint in (("nvidia.com/gpu", "gpuhook-nvidia.sock"), ("amd.com/gpu", "gpuhook-amd.sock")):
        reg = node.kubelet.wait_registered(resource, timeout=20)
        assert (reg.version, reg.endpoint, reg.options.get_preferred_allocation_available) == ("v1beta1", endpoint,
                                                                                                True)
    nvidia = _client(node, "nvidia.com/gpu")
    devices = nvidia.wait_for(lambda d: len(d) == 4)
    assert set(devices.values()) == {"Healthy"}
    uuids = sorted({i.split("::")[0] for i in devices})
    assert sorted(devices) == [f"{u}::{n}" for u in uuids for n in (0, 1)]  # 2 GPUs x 2 shares
    assert {i: nvidia.topology[i] for i in devices} == {f"{u}::{n}": [k] for k, u in enumerate(uuids) for n in (0, 1)}
    nvidia.close()


def test_a_missing_device_node_turns_its_gpu_unhealthy_within_two_seconds_and_back(node: Node) -> None:
    amd = _client(node, "amd.com/gpu")
    amd.wait_for(lambda d: len(d) == 4 and set(d.values()) == {"Healthy"})
    render = Path(node.host, "dev/dri/renderD129")
    hidden = render.with_name("renderD129.away")
    render.rename(hidden)
    t0 = time.monotonic()
    devices = amd.wait_for(lambda d: "Unhealthy" in d.values(), timeout=5)
    took = time.monotonic() - t0
    sick = sorted(i for i, h in devices.items() if h == "Unhealthy")
    assert len(sick) == 2 and sick[0].split("::")[0] == sick[1].split("::")[0]  # both shares of GPU 1
    assert took <= 2.0, f"the stream took {took:.2f} s to say so"
    hidden.rename(render)
    amd.wait_for(lambda d: set(d.values()) == {"Healthy"}, timeout=5)
    amd.close()


def test_preferred_allocation_keeps_one_numa_node_and_allocate_writes_records(node: Node) -> None:
    nvidia = _client(node, "nvidia.com/gpu")
    ids = sorted(nvidia.wait_for(lambda d: len(d) == 4))
    gpu0, gpu1 = ids[0].split("::")[0], ids[2].split("::")[0]
    # One share of GPU 0 is taken: a pod asking two shares gets both of GPU 1's (one NUMA node, least used).
    assert sorted(nvidia.preferred(ids[1:], 2)) == [f"{gpu1}::0", f"{gpu1}::1"]
    assert nvidia.preferred(ids, 1, must=[ids[3]]) == [ids[3]]
    answer = nvidia.allocate([ids[0]], [ids[2], ids[3]])
    first, second = (r.annotations["gpuhook.dev/allocation"] for r in answer.container_responses)
    rec = allocations.load(node.state, second)
    assert rec is not None and (rec.gpus, rec.shared, rec.resource) == ((gpu1,), True, "nvidia.com/gpu")
    assert allocations.load(node.state, first).gpus == (gpu0,)  # type: ignore[union-attr]
    again = nvidia.allocate([ids[0]]).container_responses[0].annotations["gpuhook.dev/allocation"]
    assert allocations.load(node.state, first) is not None  # unclaimed: it may be a pod's init container's
    allocations.claim(node.state, again, "pod-b/main", "c-b", time.time())
    latest = nvidia.allocate([ids[0]]).container_responses[0].annotations["gpuhook.dev/allocation"]
    assert allocations.load(node.state, again) is None  # claimed, then the kubelet gave the share anew: superseded
    assert allocations.load(node.state, latest) is not None
    nvidia.close()


def test_the_plugin_registers_again_when_the_kubelet_restarts_and_stops_cleanly(node: Node) -> None:
    nvidia = _client(node, "nvidia.com/gpu")
    nvidia.wait_for(lambda d: len(d) == 4)
    node.kubelet.wait_registered("amd.com/gpu", 1, timeout=20)
    for n in range(2, 5):  # restarts in a row, each racing the plugin's loop differently
        node.kubelet.restart()  # kubelet.sock recreated, the plugins' sockets removed
        for resource in ("nvidia.com/gpu", "amd.com/gpu"):
            try:
                node.kubelet.wait_registered(resource, n, timeout=20)
            except AssertionError as e:
                raise AssertionError(f"{e}\n{node.log.read_text()}") from e
        time.sleep(0.3 * (n - 2))
    again = _client(node, "nvidia.com/gpu", count=4)
    assert len(again.wait_for(lambda d: len(d) == 4)) == 4  # its new socket serves
    node.plugin.send_signal(signal.SIGTERM)
    assert node.plugin.wait(10) == 0, node.log.read_text()
    assert sorted(os.listdir(node.kubelet.directory)) == ["kubelet.sock"]  # its sockets are gone
    nvidia.close()
    again.close()


def test_a_host_without_gpus_waits_and_stops_cleanly(tmp_path: Path) -> None:
    n = _start(tmp_path, HostSpec())
    try:
        deadline = time.monotonic() + 20
        while "nothing to advertise" not in n.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "nothing to advertise" in n.log.read_text()
        n.plugin.send_signal(signal.SIGTERM)
        assert n.plugin.wait(10) == 0
        assert not n.kubelet.registrations
    finally:
        n.kubelet.stop()


def _mig_node(tmp: Path, strategy: str) -> Node:
    return _start(tmp, HostSpec(nvidia=2, mig=("3g.40gb", "1g.10gb", "1g.10gb"), mig_gpus=1),
                  f'mig_strategy = "{strategy}"\n')


def _stop(n: Node) -> None:
    if n.plugin.poll() is None:
        n.plugin.kill()
        n.plugin.wait(5)
    n.kubelet.stop()


def test_mig_mixed(tmp_path: Path) -> None:
    """mig_strategy mixed: a resource per profile (short test names: a unix socket's path has 107 characters)."""
    from gpuhook.vendors.nvidia import sim_mig

    n = _mig_node(tmp_path, "mixed")
    try:
        whole = _client(n, "nvidia.com/gpu")
        # GPU 0 is in MIG mode: not advertised as a whole GPU
        assert list(whole.wait_for(lambda d: len(d) == 1)) == ["GPU-00000001-5a1e-4000-8000-0000d00d0001"]
        reg = n.kubelet.wait_registered("nvidia.com/mig-1g.10gb", timeout=20)
        assert reg.endpoint == "gpuhook-nvidia-mig-1g.10gb.sock"
        small = n.kubelet.plugin(reg).watch()
        assert sorted(small.wait_for(lambda d: len(d) == 2)) == [sim_mig.uuid(0, 1), sim_mig.uuid(0, 2)]
        big = _client(n, "nvidia.com/mig-3g.40gb")
        assert list(big.wait_for(lambda d: len(d) == 1)) == [sim_mig.uuid(0, 0)]
        cap = Path(n.host, f"dev/nvidia-caps/nvidia-cap{sim_mig.minor(0, 3, 0)}")  # 0:2's compute instance
        cap.rename(cap.with_name("away"))
        devices = small.wait_for(lambda d: "Unhealthy" in d.values(), timeout=5)
        assert devices == {sim_mig.uuid(0, 1): "Healthy", sim_mig.uuid(0, 2): "Unhealthy"}
        rec = allocations.load(n.state, small.allocate([sim_mig.uuid(0, 1)]).container_responses[0]
                               .annotations["gpuhook.dev/allocation"])
        assert rec is not None and (rec.gpus, rec.resource) == ((sim_mig.uuid(0, 1),), "nvidia.com/mig-1g.10gb")
        for client in (whole, small, big):
            client.close()
    finally:
        _stop(n)


def test_mig_single(tmp_path: Path) -> None:
    """mig_strategy single: every MIG device is an nvidia.com/gpu, beside the whole GPUs."""
    from gpuhook.vendors.nvidia import sim_mig

    n = _mig_node(tmp_path, "single")
    try:
        gpus = _client(n, "nvidia.com/gpu")
        assert sorted(gpus.wait_for(lambda d: len(d) == 4)) == sorted(
            ["GPU-00000001-5a1e-4000-8000-0000d00d0001", *(sim_mig.uuid(0, m) for m in range(3))])
        gpus.close()
    finally:
        _stop(n)


def test_amd_cpx(tmp_path: Path) -> None:
    """AMD compute partitions: each an amd.com/gpu, named in the env by its ROCm index."""
    n = _start(tmp_path, HostSpec(amd=1, amd_partitions="CPX"), 'allocate_with = ["annotation", "env"]\n')
    try:
        amd = _client(n, "amd.com/gpu")
        ids = sorted(amd.wait_for(lambda d: len(d) == 8))
        assert ids == [f"0x5a1e000000000000/{p}" for p in range(8)]
        answer = amd.allocate([ids[5]]).container_responses[0]
        assert answer.envs["AMD_VISIBLE_DEVICES"] == "5"
        rec = allocations.load(n.state, answer.annotations["gpuhook.dev/allocation"])
        assert rec is not None and rec.gpus == (ids[5],)
        amd.close()
    finally:
        _stop(n)


def test_hygon_dcus_register_as_hygon_com_dcu(tmp_path: Path) -> None:
    """Hygon DCUs as Hygon's own device plugin names them (hygon.com/dcu), beside NVIDIA's GPUs; Allocate answers
    with the allocation, HYGON_VISIBLE_DEVICES and the CDI name."""
    n = _start(tmp_path, HostSpec(nvidia=1, hygon=2), 'allocate_with = ["annotation", "env", "cdi"]\n')
    try:
        dcu = _client(n, "hygon.com/dcu")
        ids = sorted(dcu.wait_for(lambda d: len(d) == 2))
        assert ids == ["0xdc0000000000", "0xdc0000000001"]
        answer = dcu.allocate([ids[1]]).container_responses[0]
        assert answer.envs["HYGON_VISIBLE_DEVICES"] == "0xdc0000000001"
        assert [c.name for c in answer.cdi_devices] == ["hygon.com/dcu=0xdc0000000001"]
        rec = allocations.load(n.state, answer.annotations["gpuhook.dev/allocation"])
        assert rec is not None and rec.vendor == "hygon" and rec.gpus == (ids[1],)
        n.kubelet.wait_registered("nvidia.com/gpu", 1, timeout=20)
        dcu.close()
    finally:
        _stop(n)


def test_mps_sharing_marks_nvidias_shares_as_mps_clients_and_leaves_amds_time_sliced(tmp_path: Path) -> None:
    """[kubernetes] sharing = "mps" with 4 shares: an NVIDIA GPU's allocation carries its MPS share (25% of the
    threads), which the runtime turns into an MPS client of the GPU's daemon; AMD's stays time-sliced."""
    n = _start(tmp_path, HostSpec(nvidia=1, amd=1), 'replicas = 4\nsharing = "mps"\n')
    try:
        seen = {}
        for resource in ("nvidia.com/gpu", "amd.com/gpu"):
            client = _client(n, resource)
            ids = sorted(client.wait_for(lambda d: len(d) == 4))
            answer = client.allocate([ids[0]]).container_responses[0]
            rec = allocations.load(n.state, answer.annotations["gpuhook.dev/allocation"])
            assert rec is not None and rec.shared
            seen[resource] = rec.mps_threads
            client.close()
        assert seen == {"nvidia.com/gpu": 25, "amd.com/gpu": 0}
    finally:
        _stop(n)


def test_a_partition_layout_applied_is_advertised_anew(tmp_path: Path) -> None:
    """`gpuhook partition apply` puts AMD GPU 1 in CPX while the plugin serves: amd.com/gpu advertises GPU 1's eight
    partitions, healthy, without a restart (the whole GPU 1 it advertised before stays listed, Unhealthy, as a GPU
    that went does: the kubelet's allocatable counts the nine healthy ones)."""
    n = _start(tmp_path, HostSpec(amd=2))
    try:
        amd = _client(n, "amd.com/gpu")
        amd.wait_for(lambda d: len(d) == 2)
        layout = tmp_path / "layout.toml"
        layout.write_text('[[amd]]\ngpus = [1]\ncompute = "CPX"\n')
        done = subprocess.run([conftest.GPUHOOK, "partition", "apply", str(layout)], capture_output=True, text=True,
                              env={**os.environ, "GPUHOOK_CONFIG": str(tmp_path / "gpuhook.toml")}, timeout=120)
        assert done.returncode == 0, done.stderr
        seen = amd.wait_for(lambda d: sum(h == "Healthy" for h in d.values()) == 9, timeout=20)
        assert sorted(i for i, h in seen.items() if h == "Healthy") == [
            "0x5a1e000000000000", *(f"0x5a1e000000000001/{p}" for p in range(8))]
        assert seen.get("0x5a1e000000000001") in (None, "Unhealthy")
        amd.close()
    finally:
        _stop(n)


def test_no_kubelet_directory_is_one_line_then_quiet_until_it_comes(tmp_path: Path) -> None:
    """A node without a kubelet (yet): one line naming the directory, no retry noise, then it serves once it exists."""
    host = build_host(str(tmp_path / "host"), HostSpec(nvidia=1))
    config = tmp_path / "gpuhook.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n[kubernetes]\nhealth_interval = 0.2\n')
    directory = tmp_path / "kubelet/device-plugins"
    log = tmp_path / "plugin.log"
    with open(log, "w") as err:
        plugin = subprocess.Popen([conftest.GPUHOOK, "device-plugin", "--kubelet-dir", str(directory)],
                                  env={**os.environ, "GPUHOOK_CONFIG": str(config)}, stdout=subprocess.DEVNULL,
                                  stderr=err)
    try:
        time.sleep(2.5)  # a dozen rounds
        lines = log.read_text().splitlines()  # what it found, then the one line about the kubelet
        assert lines[0].endswith("nvidia.com/gpu: 1 devices, all healthy"), lines
        assert len(lines) == 2 and f"{directory} does not exist" in lines[1], lines
        directory.mkdir(parents=True)
        for _ in range(50):
            if (directory / "gpuhook-nvidia.sock").exists():
                break
            time.sleep(0.1)
        assert (directory / "gpuhook-nvidia.sock").exists(), log.read_text()
        assert "is there: serving" in log.read_text()
    finally:
        plugin.send_signal(signal.SIGTERM)
        assert plugin.wait(10) == 0
    assert "Traceback" not in log.read_text() and not any("E0000" in ln or "grpc" in ln.lower()
                                                          for ln in log.read_text().splitlines())
