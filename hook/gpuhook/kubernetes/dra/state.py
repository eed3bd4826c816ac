"""NodePrepareResources and NodeUnprepareResources for gpuhook's DRA driver: a claim's allocation, read from the
API server, becomes a record the runtime verifies (apply/claims.py) and a CDI spec the engine applies.

The CDI spec (kind gpuhook.dev/claim, file gpuhook.dev-claim_<uid>.json in the CDI directory) has one device per
allocated device, named <claim uid>-<device>: the GPU's device nodes and driver files, as gpuhook's own CDI specs
describe them, and on the first device of each of the claim's requests the hooks: a prestart hook that names the
claim and request (request/dra_claim.py: the runtime's proof of the grant, and where the claim's tuning is
applied), a poststop hook that restores it, and the linker-cache refresh. A container on gpuhook's runtime handler
gets the same from the shim, which then drops the marker hooks; one on plain runc gets it from the hooks.

The record is written last, twice: in state_dir (/run/gpuhook/claims, which the runtime reads) and in the
driver's checkpoint, in the kubelet's plugin directory (/var/lib/kubelet/plugins/<driver>/claims), which a reboot
keeps. A claim asked again (a restarted kubelet or driver) is answered from the record, its CDI spec rewritten if
it went; a record never written means the kubelet asks again. After a reboot the kubelet does not ask again (its
own checkpoint says the claim is prepared) while its pods' containers start anew: the driver restores what /run
lost from its checkpoint when it starts (`restore`), before it registers.

A claim's CDI spec and record are a pair: prepare writes the spec, then the checkpoint, then the record in /run;
unprepare removes them in the reverse order. The driver runs the calls on one claim one at a time (its per-claim
lock, dra_driver.Driver): with no lock no order suffices (a prepare that has written its spec, an unprepare that
removes spec and record, then the prepare's record: a record without its spec), and with it each call runs
whole, so after every interleaving of prepare and unprepare both are there (the last call prepared) or neither
(it unprepared). The order is for a crash between two steps, after which the kubelet, having no answer, calls
again: what can be left is a spec without a record (prepare cut short, or unprepare after the records went),
which grants nothing, since the runtime believes only a record, and which the next prepare rewrites or unprepare
removes; never a record without its spec, which would claim the GPU for a pod that cannot start with it.

In kubernetes-sigs/dra-example-driver: cmd/dra-example-kubeletplugin/state.go (Prepare, Unprepare) and
prepared_device.go; its cdi.go is dra/cdi.py here, its checkpoint.go gpuhook's apply/claims.py (the runtime reads it,
so it sits below).
"""

from __future__ import annotations

import contextlib
import os
import time

from gpuhook.apply import claims
from gpuhook.apply.cdi_edits import CdiContext
from gpuhook.errors import GpuhookError, KubernetesError
from gpuhook.kubernetes.dra import cdi
from gpuhook.kubernetes.dra.config import tuning_by_request
from gpuhook.kubernetes.dra.partitionable import Maker
from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
from gpuhook.request.ids import is_decimal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpuhook.config import Config
    from gpuhook.host.inventory import Inventory
    from gpuhook.kubernetes.apiserver import ApiServer
    from gpuhook.vendors.contract import DraDevice

class Preparer:
    """Prepares and unprepares one node's claims of one driver."""

    def __init__(self, config: Config, api: ApiServer, driver: str, node: str, cdi_dir: str, hook_bin: str,
                 gpuhook_bin: str, helper: str = "", checkpoint: str = "", node_root: str = "/") -> None:
        """`node_root`: where the node's / is mounted for a driver in a container of its own (host_root is under
        it); the CDI specs, which the node's engine reads, name the node's paths. `hook_bin`, `gpuhook_bin` and
        `helper` are the node's already. The config's path, state_dir and ldconfig are taken to be the node's (the
        chart mounts them at the node's paths)."""
        self._config, self._api, self._driver, self._node = config, api, driver, node
        self._cdi_dir, self._checkpoint, self._node_root = cdi_dir, checkpoint, node_root
        ctx = CdiContext(host_base=cdi.on_node(config.host_root, node_root), gpuhook_bin=gpuhook_bin,
                         config_path=config.path, hook_timeout=config.hook_timeout,
                         helper=helper, ldconfig=config.ldconfig, state_dir=config.state_dir)
        self._spec_env = cdi.SpecEnv(config=config, ctx=ctx, hook_bin=hook_bin, node_root=node_root, node=node)
        # partitions made on demand ([kubernetes] partitions = "dynamic"): made at prepare (dra/partitionable.py)
        self.partitions = Maker(config, node_root) if config.kubernetes.partitions == "dynamic" else None

    def prepare(self, namespace: str, uid: str, name: str, devices: Mapping[str, DraDevice],
                inventory: Inventory) -> list[tuple[str, str, str, str]]:
        """The claim prepared: [(request, device, CDI device id, share id)] for the kubelet's answer. `devices`: what
        the driver publishes now, by name. Reads the API server; writes the CDI spec and the record. KubernetesError
        (or another GpuhookError) with the one line the kubelet shows in the pod's events."""
        record = claims.load(self._config.state_dir, uid)
        if record is None:
            record = self._allocated(namespace, uid, name, devices, inventory)
            if self.partitions is not None:
                record, devices, inventory = self.partitions.make(record, devices, inventory)
            cdi.write_spec(self.spec_path(record.uid), record, devices, inventory, self._spec_env)
            if self._checkpoint:
                claims.save(self._checkpoint, record)
            claims.save(self._config.state_dir, record)
        elif not os.path.exists(self.spec_path(uid)):  # a CDI directory emptied under a prepared claim
            if self.partitions is not None:
                record, devices, inventory = self.partitions.view(record, devices, inventory)
            cdi.write_spec(self.spec_path(record.uid), record, devices, inventory, self._spec_env)
        return [(d.request, d.device, f"{cdi.CDI_KIND}={uid}-{d.device}", d.share) for d in record.devices]

    def unprepare(self, uid: str) -> None:
        """The claim's records and CDI spec removed, in the reverse of the order `prepare` writes them (a claim
        not prepared here is fine). Deletes files."""
        claims.remove(self._config.state_dir, uid)
        if self._checkpoint:
            claims.remove(self._checkpoint, uid)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.spec_path(uid))
        if self.partitions is not None:  # what was made for the claim, once no container holds it
            self.partitions.remove(uid)

    def restore(self, devices: Mapping[str, DraDevice], inventory: Inventory) -> tuple[list[str], list[str]]:
        """Every checkpointed claim's record and CDI spec, where /run lost them (a reboot): what the kubelet's own
        checkpoint says is prepared must be, before its pods' containers start. Returns the claims restored and
        what could not be, and why (a device the node no longer has). Writes files."""
        restored, problems = [], []
        for record in claims.all_records(self._checkpoint) if self._checkpoint else ():
            if claims.load(self._config.state_dir, record.uid) is not None and os.path.exists(
                    self.spec_path(record.uid)):
                continue
            try:
                if self.partitions is not None:
                    record, devices, inventory = self.partitions.view(record, devices, inventory)
                cdi.write_spec(self.spec_path(record.uid), record, devices, inventory, self._spec_env)
            except GpuhookError as e:
                problems.append(str(e))
                continue
            claims.save(self._config.state_dir, record)
            restored.append(f"{record.namespace}/{record.name} ({record.uid})")
        return restored, problems

    @property
    def node(self) -> str:
        """The node, which names the driver's pool."""
        return self._node

    def spec_path(self, uid: str) -> str:
        """Where the claim's CDI spec is."""
        return cdi.spec_path(self._cdi_dir, uid)

    def _allocated(self, namespace: str, uid: str, name: str, devices: Mapping[str, DraDevice],
                   inventory: Inventory) -> PreparedClaim:
        """The claim's devices on this node, as the scheduler allocated them, each with its configuration."""
        claim = self._api.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}")
        meta, status = claim.get("metadata") or {}, claim.get("status") or {}
        if meta.get("uid") != uid:
            raise KubernetesError(f"claim {namespace}/{name} is now another object (uid {meta.get('uid')}, not "
                                  f"{uid}): the kubelet will ask for the new one")
        allocation = (status.get("allocation") or {}).get("devices") or {}
        results = [r for r in allocation.get("results") or []
                   if r.get("driver") == self._driver and r.get("pool") == self._node]
        if not results:
            raise KubernetesError(f"claim {namespace}/{name} has no device of {self._driver} allocated on node "
                                  f"{self._node}")
        requests = sorted({str(r.get("request", "")) for r in results})
        vendors: dict[str, set[str]] = {}  # a vendor's own driver's configuration is read for its GPUs only
        for r in results:
            d = devices.get(str(r.get("device")))
            vendors.setdefault(str(r.get("request", "")).partition("/")[0], set()).add(d.gpu.vendor if d else "")
        tuning = tuning_by_request(allocation.get("config") or [], self._driver, requests, f"{namespace}/{name}",
                                   vendors)
        out = []
        for r in results:
            d = devices.get(str(r.get("device")))
            if d is None:
                raise self._gone(namespace, name, str(r.get("device")))
            request = str(r.get("request", "")).partition("/")[0]
            admin = bool(r.get("adminAccess"))
            keys = tuple(sorted(self._shared(tuning.get(request, {}), d, admin).items()))
            share = str(r.get("shareID") or "")
            claimed = ClaimedDevice(request=request, device=d.name, vendor=d.gpu.vendor, gpu=d.gpu.key(), admin=admin,
                                    tuning=keys, share=share)
            if keys:
                self._check_tuning(namespace, name, claimed, d, inventory)
            out.append(claimed)
        pods = tuple(str(c.get("uid")) for c in status.get("reservedFor") or [] if c.get("resource") == "pods")
        return PreparedClaim(uid=uid, namespace=namespace, name=name, devices=tuple(out), pods=pods,
                             prepared=time.time())

    def _shared(self, keys: dict[str, str], d: DraDevice, admin: bool) -> dict[str, str]:
        """A request's tuning keys, made an MPS client's where the node shares its vendor's GPUs through MPS
        ([kubernetes] sharing = "mps", replicas > 1): the node's share of the threads unless it asks less."""
        from gpuhook.vendors.registry import kubernetes as kube_part

        k8s = self._config.kubernetes
        if admin or k8s.replicas < 2 or k8s.sharing != "mps" or "mps" not in kube_part(d.gpu.vendor).SHARING \
                or d.gpu.parent:
            return keys
        share = 100 // k8s.replicas
        asked = keys.get("mps-threads", "")
        threads = min(int(asked), share) if is_decimal(asked) and len(asked) <= 3 else share  # parsed by dra/config.py
        return {**keys, "mps": "true", "mps-threads": str(threads)}

    def _gone(self, namespace: str, name: str, device: str) -> KubernetesError:
        """A claim's device the node no longer publishes."""
        return KubernetesError(f"claim {namespace}/{name}: device {device} is not on node {self._node} any more "
                               "(gone, or unhealthy): delete the pod to have it scheduled anew")

    def _check_tuning(self, namespace: str, name: str, claimed: ClaimedDevice, d: DraDevice,
                      inventory: Inventory) -> None:
        """The request's configuration, checked as its annotations would be, where the pod's events show it: its
        values, what a tenant of a shared GPU may ask (plan/shared_gpu.py, as the runtime checks it again at each
        start), [tuning] policy, the rule for slices and the GPU's own ranges (tuning/backends.check_ranges: its
        clocks, power limits, fans). KubernetesError naming the claim and request. Reads the GPU (NVML, amd-smi or
        sysfs) where a setting is asked."""
        from gpuhook.host.root import Root
        from gpuhook.plan.authority import claimed_grant
        from gpuhook.plan.shared_gpu import check
        from gpuhook.plan.tuning import check_policy, settings_for
        from gpuhook.request.tuning import GPU_CONFIG_FIELDS, parse_tuning
        from gpuhook.tuning.backends import check_ranges
        from gpuhook.vendors.registry import tuning as tuning_part

        where = f"claim {namespace}/{name}, request {claimed.request}"
        if claimed.admin:
            raise KubernetesError(f"{where}: a device given with adminAccess is never tuned: move the "
                                  "configuration to a claim without adminAccess")
        inv = inventory.vendor(d.gpu.vendor)
        fields = {key: field for field, key in GPU_CONFIG_FIELDS.items()}
        try:
            tuning = parse_tuning(dict(claimed.tuning))
            check(tuning, claimed_grant(f"{namespace}/{name}", claimed, self._config),
                  lambda key: f"{fields.get(key, key)} in the GpuConfig")
            check_policy(tuning, self._config.tuning)
            if inv is not None:
                settings = settings_for(tuning, [(inv, [d.gpu])], self._config.tuning.shared_slices)
                shared, _ = tuning_part(inv.vendor).sharing(tuning, [d.gpu], self._config.tuning.mps_dir)
                # the GPU's own ranges, as the shim checks them before runc (the prestart hook's set: last)
                check_ranges(Root(self._config.host_root), self._config.state_dir, (*settings, *shared))
        except GpuhookError as e:
            raise KubernetesError(f"{where}: {e}") from e
