"""`gpuhook device-plugin`: the long-running loop. One ResourcePlugin per vendor whose driver is loaded (and, under
`[kubernetes] mig_strategy = "mixed"`, one per MIG profile: device_plugin/devices.py), each served on its own socket in
the kubelet's device plugin directory and registered with the kubelet.

Every `health_interval` the loop re-runs discovery (the runtime's own) and updates what each plugin
advertises; when the kubelet restarts (its socket is recreated, or ours was removed) it serves and registers
anew; it expires allocations nobody claimed. SIGTERM or SIGINT: stop the streams, remove the sockets, exit 0.

In the device plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): the plugin's life beside the kubelet:
Register on the kubelet's socket, serve, register again when the kubelet restarts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

import grpc

from gpuhook.apply import allocations
from gpuhook.host.numa import numa_node
from gpuhook.host.root import Root
from gpuhook.kubernetes.api import constants, deviceplugin_pb2_grpc
from gpuhook.kubernetes.api import deviceplugin_pb2 as pb
from gpuhook.kubernetes.device_plugin.devices import advertise, resources
from gpuhook.kubernetes.device_plugin.server import ResourcePlugin
from gpuhook.vendors.discover import discover, identified
from gpuhook.vendors.registry import get, resource
from gpuhook.vendors.registry import kubernetes as kube_part

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.config import Config
    from gpuhook.host.inventory import Gpu, Inventory, VendorInventory

_EXPIRE_EVERY = 30.0  # seconds between sweeps of unclaimed, expired allocations
_REGISTER_TIMEOUT = 5.0


def say(line: str) -> None:
    """One line on stderr (the DaemonSet's log)."""
    sys.stderr.write(f"gpuhook device-plugin: {line}\n")
    sys.stderr.flush()


class _Served:
    """One plugin's gRPC server on its socket, and whether the kubelet took its registration."""

    def __init__(self, plugin: ResourcePlugin, kubelet_dir: str, config: Config) -> None:
        self.plugin = plugin
        name = plugin.vendor.NAME  # the vendor's resource; another (a MIG profile's) adds its own name
        if plugin.resource != resource(name, config.kubernetes.resources):
            name += "-" + plugin.resource.split("/", 1)[-1]
        self.socket = os.path.join(kubelet_dir, f"gpuhook-{name}.sock")
        self.server: grpc.Server | None = None
        self.registered = False

    def serve(self) -> None:
        """(Re)bind the socket and start serving. Creates the socket file."""
        self.close()
        _remove(self.socket)
        server = grpc.server(_executor(), options=[("grpc.so_reuseport", 0)])
        deviceplugin_pb2_grpc.add_DevicePluginServicer_to_server(self.plugin, server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self.server, self.registered = server, False

    def close(self) -> None:
        """Stop serving and remove the socket."""
        if self.server is not None:
            self.server.stop(grace=0.5).wait(2)
            self.server = None
        _remove(self.socket)


def _remove(path: str) -> None:
    """Remove a socket file; one the kubelet removed meanwhile (it cleans its directory when it starts) is fine."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def run(config: Config, kubelet_dir: str) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status. Reads the host, writes sockets and records."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    root = Root(config.host_root)
    strategy = config.kubernetes.mig_strategy
    named: dict[tuple[str, ...], Inventory] = {}
    inventory = _inventory(root, strategy, named)
    served = [_Served(ResourcePlugin(get(inv.vendor), config, say, resource), kubelet_dir, config)
              for inv in inventory.vendors
              for resource in _resources(inv, config)]
    if not served:
        say(f"no GPU driver is loaded on this host (root {config.host_root}): nothing to advertise; waiting")
    kubelet_sock = os.path.join(kubelet_dir, constants.KUBELET_SOCKET_NAME)
    kubelet_seen: tuple[int, int] | None = None
    numa: dict[str, int] = {}
    last_expire = 0.0
    waiting = False  # said that the kubelet's directory is missing (said once, then quiet until it comes)
    repeated: set[str] = set()  # problems already said (a retry each round would say them every second)
    try:
        while not stop.is_set():
            inventory = _inventory(root, strategy, named)
            for found in inventory.vendors:  # a MIG profile made since start gets its own resource
                for resource in _resources(found, config):
                    if all(s.plugin.resource != resource for s in served):
                        served.append(_Served(ResourcePlugin(get(found.vendor), config, say, resource), kubelet_dir,
                                              config))
            for s in served:
                inv = inventory.vendor(s.plugin.vendor.NAME)
                for g in inv.gpus if inv else ():
                    if g.pci not in numa:
                        numa[g.pci] = numa_node(root, g.pci)
                gpus = _resources(inv, config).get(s.plugin.resource, ()) if inv else ()
                if s.plugin.update(advertise(inv, config.kubernetes.replicas, numa, s.plugin.devices, gpus)):
                    bad = [f"{d.id} ({d.why})" for d in s.plugin.devices if not d.healthy]
                    say(f"{s.plugin.resource}: {len(s.plugin.devices)} devices"
                        + (f", unhealthy: {', '.join(bad)}" if bad else ", all healthy"))
            now_seen = _identity(kubelet_sock)
            if not os.path.isdir(kubelet_dir):  # no kubelet (yet) on this node: nothing to serve on
                if not waiting and served:
                    say(f"the kubelet's device plugin directory {kubelet_dir} does not exist (no kubelet on this "
                        "node yet, or [kubernetes] kubelet_dir / --kubelet-dir is not its root's): waiting for it")
                waiting = True
                stop.wait(config.kubernetes.health_interval)
                continue
            if waiting:
                say(f"{kubelet_dir} is there: serving")
                waiting = False
            for s in served:
                try:
                    if s.server is None or now_seen != kubelet_seen or not os.path.exists(s.socket):
                        s.serve()
                    if not s.registered and now_seen is not None:
                        s.registered = _register(kubelet_sock, s, config, repeated)
                except (OSError, RuntimeError) as e:  # a directory in flux (the kubelet restarting): next round
                    _once(repeated, f"{s.plugin.resource}: cannot serve on {s.socket} ({e}); trying again quietly")
            kubelet_seen = now_seen
            if time.monotonic() - last_expire > _EXPIRE_EVERY:
                for gone in allocations.expire(config.state_dir, time.time()):
                    say(f"allocation {gone} expired unclaimed")
                last_expire = time.monotonic()
            stop.wait(config.kubernetes.health_interval)
    finally:
        for s in served:
            s.plugin.stop()
            s.close()
        say("stopped")
    return 0


def _resources(inv: VendorInventory, config: Config) -> dict[str, tuple[Gpu, ...]]:
    """The resources to serve for one vendor's inventory, each with what it advertises."""
    return resources(inv, resource(inv.vendor, config.kubernetes.resources), config.kubernetes.mig_strategy,
                     kube_part(inv.vendor).SLICE_RESOURCE)


def _inventory(root: Root, strategy: str, named: dict[tuple[str, ...], Inventory]) -> Inventory:
    """Discovery, with the MIG devices' UUIDs and profiles (NVML) when a strategy advertises them: asked again only
    when the slices procfs shows change (`named` caches the last answer)."""
    found = discover(root)
    if strategy == "none" or not any(v.slices for v in found.vendors):
        return found
    layout = tuple(f"{s.parent}/{s.place}/{len(s.nodes)}" for v in found.vendors for s in v.slices)
    if layout not in named:
        named.clear()
        named[layout] = identified(root, found)
    from gpuhook.frozen import replace

    cached = named[layout]
    return replace(found, vendors=tuple(replace(v, slices=c.slices) if (c := cached.vendor(v.vendor)) else v
                                        for v in found.vendors))


def _identity(path: str) -> tuple[int, int] | None:
    """What tells a recreated kubelet socket from the old one (inode, change time), None while absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


def _once(said: set[str], line: str) -> None:
    """Say `line` unless it was said already (a problem the loop retries every round)."""
    if line not in said:
        said.add(line)
        say(line)


def _register(kubelet_sock: str, s: _Served, config: Config, said: set[str]) -> bool:
    """Register the plugin's resource with the kubelet; whether it took it (else the loop tries again)."""
    request = pb.RegisterRequest(version=constants.VERSION, endpoint=os.path.basename(s.socket),
                                 resource_name=s.plugin.resource,
                                 options=pb.DevicePluginOptions(get_preferred_allocation_available=True))
    try:
        with grpc.insecure_channel(f"unix://{kubelet_sock}") as channel:
            deviceplugin_pb2_grpc.RegistrationStub(channel).Register(request, timeout=_REGISTER_TIMEOUT)
    except grpc.RpcError as e:
        _once(said, f"{s.plugin.resource}: the kubelet at {kubelet_sock} refused the registration "
              f"({e.code().name}: {e.details()}); trying again quietly")
        return False
    said.clear()  # a later problem is news again
    say(f"{s.plugin.resource}: registered with the kubelet as {os.path.basename(s.socket)} "
        f"(replicas {config.kubernetes.replicas})")
    return True


def _executor() -> object:
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="device-plugin")
