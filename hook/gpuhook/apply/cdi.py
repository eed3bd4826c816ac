"""CDI specs (nvidia.com/gpu, amd.com/gpu) from the same Edits the shim applies. Pure: the CLI writes them.

Devices: one per index, one per UUID, and `all`. Spec-wide edits: the vendor's shared nodes, the driver
files for the capabilities asked (NVIDIA), the linker-cache hook (`gpuhook hook update-ldcache`, since a CDI
spec cannot know the container's root), the groups the nodes need, and NVIDIA_/AMD_VISIBLE_DEVICES=void so
that gpuhook's shim or hook, if also present, does not inject the same GPUs again. The fields are written by
Edits.to_cdi, the same table the shim and the hook use.
cdiVersion is the lowest the fields need: 0.5.0 (hostPath, device names starting with a digit), 0.7.0 with
additionalGids. An older target drops what it cannot carry, and says so.
"""

from __future__ import annotations

from gpuhook.edits import CdiContext, Edits
from gpuhook.errors import CdiError
from gpuhook.request.requirements import version_tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.edits import DeviceNode
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.vendors.registry import Vendor


def build(vendor: Vendor, inv: VendorInventory, host_base: str, capabilities: frozenset[str], gpuhook_bin: str,
          config_path: str, target: str | None = None, hook_timeout: int = 30) -> tuple[dict[str, Any], list[str]]:
    """The CDI spec for one vendor and the warnings (fields dropped for an older `target` version)."""
    if not inv.gpus:
        raise CdiError(f"the {vendor.LABEL} driver lists no GPUs under {host_base}: no CDI devices to describe")
    ctx = CdiContext(host_base, gpuhook_bin, config_path, hook_timeout)
    every = vendor.plan(inv, inv.gpus, capabilities, host_base)
    gpu_paths = {n.path for g in inv.gpus for n in g.nodes}
    shared = Edits.for_nodes(n for n in every.device_nodes if n.path not in gpu_paths)
    common = Edits(device_nodes=shared.device_nodes, device_rules=shared.device_rules, mounts=every.mounts,
                   env=(f"{vendor.ENV_KEY}=void", *every.env), additional_gids=every.additional_gids,
                   hooks=every.hooks, ldcache_dirs=every.ldcache_dirs)
    edits = common.to_cdi(ctx)
    needed = "0.7.0" if every.additional_gids else "0.5.0"
    version, warnings = needed, []
    if target:
        if version_tuple(target) < (0, 5, 0):
            raise CdiError(f"cdiVersion {target} cannot carry hostPath or device names that start with a digit: "
                           "0.5.0 is the oldest gpuhook writes")
        if version_tuple(target) < version_tuple(needed):
            edits.pop("additionalGids", None)
            warnings.append(f"cdiVersion {target} has no additionalGids: dropped {list(every.additional_gids)}; "
                            "a non-root container user then needs the nodes' groups from the engine "
                            "(e.g. podman --group-add)")
        version = target
    devices = [{"name": name, "containerEdits": Edits(device_nodes=nodes).to_cdi(ctx)}
               for name, nodes in _devices(inv.gpus)]
    return {"cdiVersion": version, "kind": vendor.CDI_KIND, "devices": devices, "containerEdits": edits}, warnings


def _devices(gpus: tuple[Gpu, ...]) -> list[tuple[str, tuple[DeviceNode, ...]]]:
    out = [(str(g.index), g.nodes) for g in gpus]
    out += [(g.uuid, g.nodes) for g in gpus if g.uuid]
    out.append(("all", tuple(n for g in gpus for n in g.nodes)))
    return out


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block YAML for the plain data of a spec (strings double-quoted, JSON-escaped: valid YAML)."""
    import json

    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "\n".join(f"{pad}{k}:" + (f"\n{to_yaml(v, indent + 1)}" if isinstance(v, (dict, list)) and v
                                          else f" {to_yaml(v)}") for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for item in value:
            text = to_yaml(item, indent + 1) if isinstance(item, (dict, list)) and item else f"{pad}  {to_yaml(item)}"
            lines.append(f"{pad}- " + text.lstrip())
        return "\n".join(lines)
    return json.dumps(value)

