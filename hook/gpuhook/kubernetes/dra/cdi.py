"""A prepared claim's CDI spec (kind gpuhook.dev/claim, file gpuhook.dev-claim_<uid>.json in the CDI directory):
one device per allocated device, its nodes, mounts and the vendor's env for it, and the request's prestart and
poststop hooks once per request (the kubelet gives a container whole requests). The spec names the node's paths
(`on_node`): a driver in a container of its own sees the node under --node-root.

In kubernetes-sigs/dra-example-driver: cmd/dra-example-kubeletplugin/cdi.go.
"""

from __future__ import annotations

import os

from gpuhook import fastjson
from gpuhook.apply.cdi_edits import CdiContext, to_cdi
from gpuhook.apply.cdi_rules import required_version
from gpuhook.atomic import write_text
from gpuhook.edits import Edits, Hook, merge
from gpuhook.errors import DiscoveryError, KubernetesError
from gpuhook.frozen import frozen
from gpuhook.host.root import Root
from gpuhook.request.container import DEFAULT_CAPABILITIES
from gpuhook.request.dra_claim import marker_args

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.host.inventory import Inventory
    from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
    from gpuhook.vendors.contract import DraDevice

CDI_KIND = "gpuhook.dev/claim"


@frozen
class SpecEnv:
    """What every claim's spec on this node is written with."""

    config: Config
    ctx: CdiContext  # the node's paths of gpuhook's binaries, config and state
    hook_bin: str  # the node's gpuhook-hook
    node_root: str  # where the node's / is mounted for this process
    node: str  # the node's name, in messages


def spec_path(cdi_dir: str, uid: str) -> str:
    """Where claim `uid`'s spec is."""
    return os.path.join(cdi_dir, f"gpuhook.dev-claim_{os.path.basename(uid)}.json")


def write_spec(path: str, record: PreparedClaim, devices: Mapping[str, DraDevice], inventory: Inventory,
               env: SpecEnv) -> None:
    """The claim's CDI spec at `path` (atomically); KubernetesError for a device the node no longer has. Writes a
    file."""
    from gpuhook.vendors.registry import get

    first: set[str] = set()
    entries = []
    hook_env = (f"GPUHOOK_CONFIG={env.config.path}",)
    name = os.path.basename(env.hook_bin)
    timeout = env.config.hook_timeout
    for c in record.devices:
        d = devices.get(c.device)
        inv = inventory.vendor(c.vendor)
        if d is None or inv is None:
            raise KubernetesError(f"claim {record.namespace}/{record.name}: device {c.device} is not on node "
                                  f"{env.node} any more (gone, or unhealthy): delete the pod to have it scheduled anew")
        vendor = get(c.vendor)
        plan = vendor.plan(inv, [d.gpu], DEFAULT_CAPABILITIES, on_node(inventory.root, env.node_root))
        edits = Edits(device_nodes=plan.device_nodes, mounts=plan.mounts,
                      env=(f"{vendor.ENV_KEY}=void", *_mps_client_env(c, d, env.config)),
                      additional_gids=plan.additional_gids)
        if c.request not in first:  # the request's hooks, once: the kubelet gives a container whole requests
            first.add(c.request)
            hooks = (Hook(stage="prestart", path=env.hook_bin, args=(name, "hook", "prestart",
                                                                     *marker_args(record.uid, c.request)),
                          env=hook_env, timeout=timeout),
                     Hook(stage="poststop", path=env.hook_bin, args=(name, "hook", "poststop"), env=hook_env,
                          timeout=timeout))
            edits = merge([edits, Edits(hooks=(*plan.hooks, *hooks), ldcache_dirs=plan.ldcache_dirs)])
        entries.append({"name": f"{record.uid}-{c.device}", "containerEdits": to_cdi(edits, env.ctx)})
    spec: dict[str, Any] = {"cdiVersion": "", "kind": CDI_KIND, "devices": entries}
    spec["cdiVersion"] = required_version(spec)
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    write_text(path, fastjson.dumps(spec), mode=0o644)


def _mps_client_env(c: ClaimedDevice, d: DraDevice, config: Config) -> tuple[str, ...]:
    """An MPS client's env (its daemon's pipe and log directories as clients see them, CUDA_MPS_PIPE_DIRECTORY=
    /tmp/nvidia-mps as NVIDIA's DRA driver's CDI edits set it, and its limits): the env a prestart hook cannot set.
    The mounts (pipe, log, the daemon's shared memory at /dev/shm) name host directories and a tmpfs gpuhook makes
    on the node when the container is created: the shim puts them in config.json, the prestart hook mounts them
    live (a CDI spec written at prepare would name what may not exist yet)."""
    tuning = dict(c.tuning)
    if tuning.get("mps") != "true":
        return ()
    from gpuhook.request.tuning import parse_tuning
    from gpuhook.vendors.registry import tuning as tuning_part

    _, edits = tuning_part(c.vendor).sharing(parse_tuning(tuning), [d.gpu], config.tuning.mps_dir)
    return edits.env


def on_node(path: str, node_root: str) -> str:
    """`path`, a host_root as this process sees it, as the node names it: where the node's / is mounted at
    `node_root`, that prefix taken off and links followed inside it. DiscoveryError for a path outside it. Reads
    links."""
    if node_root == "/":
        return path
    root = Root(node_root)
    rel = os.path.relpath(os.path.abspath(path), root.base)
    if rel == ".." or rel.startswith("../"):
        raise DiscoveryError(f"host_root {path} is not under {root.base}, where the node's / is mounted "
                             "(--node-root): set host_root to a path under it")
    return root.to_host(root.resolve("/" + rel))  # links followed as the node follows them
