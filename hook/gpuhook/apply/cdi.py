"""CDI specs (nvidia.com/gpu, amd.com/gpu) from the same Edits the shim applies. Pure: the CLI writes them.

Devices: one per index, one per UUID, one per slice (a MIG device: its index form <gpu>:<mig> and its UUID when
NVML told it), and `all` (every GPU and slice). Spec-wide edits: the vendor's shared nodes, the driver
files for the capabilities asked (NVIDIA), the linker-cache hook (`gpuhook hook update-ldcache`, since a CDI
spec cannot know the container's root), the groups the nodes need, and NVIDIA_/AMD_VISIBLE_DEVICES=void so
that gpuhook's shim or hook, if also present, does not inject the same GPUs again. The fields are written by
apply/cdi_edits.py, the same kinds of edit the shim and the hook write.
cdiVersion is the lowest the fields need (cdi_rules.required_version: 0.5.0 for hostPath and device names starting
with a digit, 0.7.0 with additionalGids), capped at the highest every installed CDI consumer parses (cdi_readers)
or at the version asked. What the lower version cannot carry is dropped, and the warning says what the user adds
instead; a node's permissions are never widened to make up for a group. A rootless engine bind-mounts each node
from the host (a user namespace cannot make one) and maps only the user's own ids: the groups reach its containers
as the user's own host groups, kept (ROOTLESS), whatever the spec says.
"""

from __future__ import annotations

import os

from gpuhook.apply.cdi_edits import CdiContext, to_cdi
from gpuhook.apply.cdi_readers import common_highest
from gpuhook.apply.cdi_rules import required_version
from gpuhook.edits import Edits
from gpuhook.errors import CdiError
from gpuhook.request.requirements import version_tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.apply.cdi_readers import Reader
    from gpuhook.edits import DeviceNode
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.vendors.registry import Vendor


def build(vendor: Vendor, inv: VendorInventory, host_base: str, capabilities: frozenset[str], gpuhook_bin: str,
          config_path: str, target: str | None = None, hook_timeout: int = 30,
          readers: tuple[Reader, ...] = (), helper: str = "", ldconfig: str = "/sbin/ldconfig",
          state_dir: str = "/run/gpuhook") -> tuple[dict[str, Any], list[str]]:
    """The CDI spec for one vendor and the warnings: fields dropped for the `target` version, else for the highest
    version all `readers` (the installed CDI consumers) parse, and readers that cannot parse the target."""
    if not inv.gpus:
        raise CdiError(f"the {vendor.LABEL} driver lists no GPUs under {host_base}: no CDI devices to describe")
    ctx = CdiContext(host_base=host_base, gpuhook_bin=gpuhook_bin, config_path=config_path, hook_timeout=hook_timeout,
                     helper=helper, ldconfig=ldconfig, state_dir=state_dir)
    every = vendor.plan(inv, inv.gpus, capabilities, host_base)
    gpu_paths = {n.path for g in inv.gpus for n in g.nodes}
    shared = Edits.for_nodes(n for n in every.device_nodes if n.path not in gpu_paths)
    common = Edits(device_nodes=shared.device_nodes, device_rules=shared.device_rules, mounts=every.mounts,
                   env=(f"{vendor.ENV_KEY}=void", *every.env), additional_gids=every.additional_gids,
                   hooks=every.hooks, ldcache_dirs=every.ldcache_dirs)
    devices = [{"name": name, "containerEdits": to_cdi(Edits(device_nodes=nodes), ctx)}
               for name, nodes in _devices(inv)]
    spec: dict[str, Any] = {"cdiVersion": "", "kind": vendor.CDI_KIND, "devices": devices,
                            "containerEdits": to_cdi(common, ctx)}
    needed = required_version(spec)
    version, why = _version(needed, target, readers)
    warnings = [f"{r.label} cannot parse cdiVersion {version} (it knows up to {r.highest})" for r in readers
                if r.library and version_tuple(r.highest) < version_tuple(version)]
    if version_tuple(version) < version_tuple(needed):  # below 0.7.0: the groups cannot be carried
        spec["containerEdits"].pop("additionalGids", None)
        gids = list(every.additional_gids)
        warnings.append(f"{why} has no additionalGids: dropped {gids}, the device nodes' groups. A container user "
                        "other than root needs them from the engine: podman run "
                        + " ".join(f"--group-add {g}" for g in gids) + " (docker run --group-add alike; Kubernetes: "
                        f"securityContext.supplementalGroups: {gids}; {ROOTLESS}); the nodes' permissions stay as "
                        "they are")
    spec["cdiVersion"] = version
    return spec, warnings


# In a rootless engine's user namespace a gid is the namespace's (109 there is one of the user's subordinate gids),
# so neither additionalGids nor --group-add 109 gives the host's group: the user's own host groups, kept, do
ROOTLESS = ("rootless Podman, whose user namespace holds none of the host's groups: podman run --group-add "
            "keep-groups with crun, the user in those groups on the host")


def _version(needed: str, target: str | None, readers: tuple[Reader, ...]) -> tuple[str, str]:
    """The cdiVersion to write and how warnings name it: `target`, else what the fields need, capped at the
    highest the readers parse; CdiError below 0.5.0 (hostPath, digit-led names), with the way out."""
    limit = common_highest(readers)
    version, why = (target, f"cdiVersion {target}") if target else (needed, f"cdiVersion {needed}")
    if not target and limit and version_tuple(limit[0]) < version_tuple(needed):
        version, why = limit[0], f"cdiVersion {limit[0]}, the highest {limit[1].label} parses,"
    if version_tuple(version) < (0, 5, 0):
        upgrade = (f"; upgrade {limit[1].label.split()[0]} (Podman 4.3, containerd 1.7, Docker 25, CRI-O 1.25 or "
                   "later read 0.5.0)") if limit and not target else ""
        raise CdiError(f"{why.rstrip(',')} cannot carry hostPath or device names that start with a digit: 0.5.0 is "
                       f"the oldest cdiVersion gpuhook writes{upgrade}")
    return version, why


def is_ours(spec: object, vendor: Vendor) -> bool:
    """Whether a parsed spec is one gpuhook wrote for `vendor`: its kind, and its ENV_KEY=void marker."""
    if not isinstance(spec, dict) or not isinstance(edits := spec.get("containerEdits"), dict):
        return False
    return spec.get("kind") == vendor.CDI_KIND and f"{vendor.ENV_KEY}=void" in (edits.get("env") or [])


def stale(spec: dict[str, Any], vendor: Vendor, inv: VendorInventory | None, host_base: str) -> list[str]:
    """Why a spec gpuhook wrote for `vendor` no longer fits the loaded driver ([] when it does): driver files
    the loaded driver does not have (another version's), device nodes or GPUs other than the host's."""
    if inv is None:
        return [f"it describes {vendor.LABEL} GPUs but no {vendor.LABEL} driver is loaded"]
    from gpuhook.request.container import CAPABILITIES

    every = vendor.plan(inv, inv.gpus, frozenset(CAPABILITIES), host_base)  # the loaded driver's every file
    edits = [spec.get("containerEdits") or {}, *((d.get("containerEdits") or {}) for d in spec.get("devices") or [])]
    out = []
    foreign = sorted({m.get("hostPath", "") for e in edits for m in e.get("mounts") or []}
                     - {m.host_path for m in every.mounts})
    if foreign:
        shown = ", ".join(os.path.basename(f) for f in foreign[:3]) + (", …" if len(foreign) > 3 else "")
        out.append(f"it mounts {len(foreign)} files the loaded {vendor.LABEL} driver "
                   f"{inv.driver_version or '(in-kernel)'} does not have ({shown})")
    host = {n.path: (n.major, n.minor) for n in (*every.device_nodes, *inv.shared_nodes)}
    wrong = sorted({n.get("path", "") for e in edits for n in e.get("deviceNodes") or []
                    if host.get(n.get("path", "")) != (n.get("major"), n.get("minor"))})
    if wrong:
        out.append("its device nodes are not the host's: " + ", ".join(wrong))
    names = {d.get("name") for d in spec.get("devices") or []}
    now = {name for name, _ in _devices(inv)}
    if names != now:
        out.append(f"it lists {len(names - {'all'})} devices where the host has {len(now - {'all'})} GPU names "
                   f"(gone: {', '.join(sorted(str(n) for n in names - now)) or 'none'}; new: "
                   f"{', '.join(sorted(now - names)) or 'none'})")
    return out


def _devices(inv: VendorInventory) -> list[tuple[str, tuple[DeviceNode, ...]]]:
    out = [(str(g.index), g.nodes) for g in inv.gpus]
    out += [(g.slice, g.nodes) for g in inv.slices]
    out += [(g.uuid, g.nodes) for g in (*inv.gpus, *inv.slices) if g.uuid]
    out.append(("all", tuple(dict.fromkeys(n for g in (*inv.gpus, *inv.slices) for n in g.nodes))))
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

