"""The DRA driver's loop (`gpuhook dra-driver`): every `[kubernetes] health_interval`, discovery again (the
runtime's own), the devices and their taints described (dra/taints.py) and published (dra/slices.py) when they
changed, and the services (dra/driver.py) served and registered anew when the kubelet removed their sockets (a
restart). Reads the host, writes sockets, CDI specs and records, talks to the kubelet and the API server.

In kubernetes-sigs/dra-example-driver: cmd/dra-example-kubeletplugin/main.go (the plugin started, the loop until a
signal).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import grpc

from gpuhook.apply import dra_node
from gpuhook.errors import GpuhookError
from gpuhook.host.numa import numa_node
from gpuhook.host.root import Root
from gpuhook.kubernetes.dra.devices import device_json, pcie_root
from gpuhook.kubernetes.dra.driver import DRIVER, Driver, say
from gpuhook.kubernetes.dra.registration import serve
from gpuhook.kubernetes.dra.slices import Publisher
from gpuhook.kubernetes.dra.state import Preparer
from gpuhook.kubernetes.dra.taints import Watch, describe, kept, publishable, summary, taints_json
from gpuhook.vendors.discover import discover, identified

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.host.inventory import Inventory
    from gpuhook.kubernetes.apiserver import ApiServer
    from gpuhook.vendors.contract import DraDevice


def run(config: Config, api: ApiServer, node: str, driver: str, plugins_dir: str, registry_dir: str,
        cdi_dir: str, node_root: str = "/", node_bin_dir: str = "") -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status. Reads the host, writes sockets, CDI specs and
    records, talks to the kubelet and the API server. `node_root`, `node_bin_dir`: a driver in a container of its
    own (the chart's) names the node's paths in its CDI specs (dra/state.Preparer)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    hook, gpuhook_bin, helper = _hooks(os.path.dirname(os.path.abspath(sys.argv[0])), node_bin_dir)
    preparer = Preparer(config, api, driver, node, cdi_dir, hook, gpuhook_bin, helper,
                        checkpoint=os.path.join(plugins_dir, driver), node_root=node_root)
    endpoint = os.path.join(plugins_dir, driver, "dra.sock")
    registration = os.path.join(registry_dir, f"{driver}-reg.sock")
    servicer = Driver(config, preparer, endpoint, driver)
    publisher = Publisher(api, driver, node)
    root = Root(config.host_root)
    server: grpc.Server | None = None
    said: set[str] = set()
    layout: tuple[Any, ...] | None = None
    wanted: list[dict[str, Any]] = []
    left: dict[str, str] = {}
    watch = Watch(root)  # XIDs, RAS counters, taints' times (dra/taints.py)
    dra_node.mark(config.state_dir, driver)  # the runtime's refusals name the claims' way to ask
    try:
        while not stop.is_set():
            found = discover(root)
            health, lines = watch.read(found)
            for line in lines:
                say(line)
            if watch.log_error:
                _once(said, f"cannot read the kernel log ({watch.log_error}): no XIDs are watched until it can be")
            now = (_layout(found), health)
            if now != layout:  # the vendors' facts (NVML, KFD) asked again only when discovery or health changed
                layout = now
                inventory = identified(root, found)
                shown, left = publishable(describe(inventory, root, watch.xids, watch.ras), watch.keeps is not False)
                if preparer.partitions is not None:  # partitions made on demand (dra/partitionable.py)
                    shown = preparer.partitions.shown(shown, inventory, root)
                devices = {d.name: d for d, _ in shown}
                servicer.update(devices, inventory, left)
                wanted = [_body(d, root, said, config.kubernetes.replicas,
                                taints_json(d.name, faults, driver, watch.stamps), driver) for d, faults in shown]
                if preparer.partitions is not None:
                    wanted = preparer.partitions.bodies(wanted)
                watch.stamps.forget_unused()
                if server is None:  # before the kubelet can call: what a reboot took from /run, back
                    restored, problems = preparer.restore(devices, inventory)
                    for claim in restored:
                        say(f"restored prepared claim {claim} from the checkpoint")
                    for problem in problems:
                        say(f"cannot restore a prepared claim: {problem}")
            if servicer.republish.is_set():
                servicer.republish.clear()
                publisher.forget()
            try:
                if publisher.publish(wanted, preparer.partitions.counter_sets() if preparer.partitions else ()):
                    say(f"published {len(wanted)} devices in node {node}'s pool" + summary(wanted, left))
                    if watch.keeps is None and any("taints" in b for b in wanted):
                        watch.keeps = kept(api, node, driver, lambda line: _once(said, line))
            except GpuhookError as e:
                publisher.forget()
                _once(said, f"cannot publish the node's ResourceSlices ({e}); trying again")
            if server is None or not (os.path.exists(endpoint) and os.path.exists(registration)):
                if server is not None:
                    say("the kubelet removed our sockets (it restarted): serving and registering anew")
                server = serve(servicer, endpoint, registration, server)
            stop.wait(config.kubernetes.health_interval)
    finally:
        servicer.stop()
        if server is not None:
            server.stop(grace=1).wait(3)
        for path in (endpoint, registration):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        dra_node.unmark(config.state_dir)
        say("stopped")
    return 0


def _hooks(here: str, node_bin_dir: str) -> tuple[str, str, str]:
    """The programs the CDI specs run (the hook's native front end, gpuhook, and the front end again as the
    linker cache's hook, "" where not built): this build's, named in `node_bin_dir` where the node has it elsewhere
    (the installer copied this very build there, so what is built here is built there)."""
    from gpuhook.proc import beside

    there = node_bin_dir or here
    gpuhook_bin = os.path.join(there, "gpuhook")
    native = beside(here, "gpuhook-hook")
    hook = os.path.join(there, "gpuhook-hook") if native else gpuhook_bin
    return hook, gpuhook_bin, hook if native else ""


def _layout(inventory: Inventory) -> tuple[Any, ...]:
    """What discovery says that the published devices depend on: each GPU and slice, its nodes, its shape and
    its health, and the drivers' versions."""
    from gpuhook.host.health import problem

    return tuple((v.vendor, v.driver_version, tuple((g.key(), g.pci, g.profile, g.place, problem(g),
                                                     tuple(n.path for n in g.nodes)) for g in (*v.gpus, *v.slices)))
                 for v in inventory.vendors)


def _body(d: DraDevice, root: Root, said: set[str], shares: int, taints: list[dict[str, Any]],
          driver: str = DRIVER) -> dict[str, Any]:
    """One device as the API takes it, published by `driver`, with its `taints` (dra/taints.py). Reads the PCI
    device's NUMA node and root complex."""
    body, dropped = device_json(d, numa_node(root, d.gpu.pci) if d.gpu.pci else -1, pcie_root(root, d.gpu.pci),
                                shares, driver)
    if dropped:
        _once(said, f"{d.name}: more than 32 attributes and capacities; left out: {', '.join(dropped)}")
    if taints:
        body["taints"] = taints
    return body


def _once(said: set[str], line: str) -> None:
    if line not in said:
        said.add(line)
        say(line)
