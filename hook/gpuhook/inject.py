"""The shim's GPU path: request -> inventory -> plan -> edited spec. Loaded only when a request may exist."""

from __future__ import annotations

import os
import sys

from gpuhook import logs, records
from gpuhook.config import Config, from_table
from gpuhook.discover import discover
from gpuhook.edits import Edits, Hook, ProcOverlay, merge
from gpuhook.errors import ConfigError, PolicyError, RequestError
from gpuhook.inventory import VendorInventory
from gpuhook.plan import edits_for, select_all
from gpuhook.record import record
from gpuhook.request import HostRocm, Request, env_map, parse_request
from gpuhook.root import Root
from gpuhook.spec import apply_edits, rootfs
from gpuhook.tuneplan import Setting, check_policy, gpus_in_spec, settings_for

TYPE_CHECKING = False  # typing costs milliseconds to import: the GPU path sits in front of a container start
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.spec import Spec


@record
class Prepared:
    """A GPU container's edits, the warnings for its user, and the drivers whose user space it gets."""

    edits: Edits
    warnings: tuple[str, ...]
    drivers: tuple[tuple[str, str], ...] = ()
    settings: tuple[Setting, ...] = ()  # host tuning for the prestart hook to apply
    exclusive: tuple[str, ...] = ()  # GPUs to lease
    gpus: tuple[str, ...] = ()  # every GPU the container gets (UUID, else PCI address)


def prepare(spec: Spec, bundle: str, config: Config, log: Any, gpuhook_bin: str = "/usr/local/bin/gpuhook"
            ) -> Prepared | None:
    """What the container asked for, checked against the host and the image, as Edits; None when it asks for
    nothing. Reads the host and the image's files, writes procfs copies under state_dir; RequestError,
    PlanError or PolicyError when it cannot start."""
    annotations = spec.get("annotations") or {}
    env = env_map((spec.get("process") or {}).get("env") or [])
    request = parse_request(annotations, env, config.policy.accept_env_requests)
    tuning = request.tuning
    if not request.wants_gpus and not tuning.touches_host() and not tuning.env:
        if request.host_rocm_asked and request.host_rocm:
            raise RequestError("gpuhook.dev/host-rocm needs AMD GPUs: add gpuhook.dev/gpus")
        log.debug("no gpu request")
        return None
    check_policy(tuning, config.tuning)
    root = Root(config.host_root)
    named = frozenset(s.vendor or "" for s in request.selections)
    scoped = request.wants_gpus and "" not in named  # every selection names its vendor: discover only those
    inventory = discover(root, named if scoped else None)
    if scoped and any(inventory.vendor(v) is None for v in named):  # PlanError will say what the host has
        inventory = discover(root)
    if request.wants_gpus:
        selected = select_all(request, inventory)
    else:  # tuning for the GPUs a device plugin (or --device) already put in the spec
        selected = gpus_in_spec(((spec.get("linux") or {}).get("devices") or []), inventory)
        if not selected:
            raise RequestError("the gpuhook.dev/ tuning annotations need GPUs: add gpuhook.dev/gpus, or give the "
                               "container GPU device nodes (a device plugin, --device)")
    by_vendor = {inv.vendor: (inv, gpus) for inv, gpus in selected}
    if tuning.env and "amd" not in by_vendor:
        raise RequestError("gpuhook.dev/fine-grain-pcie and gpuhook.dev/gfx-override are AMD runtime settings, "
                           "but this container's GPUs are " + ", ".join(by_vendor))
    settings = settings_for(tuning, selected)
    gpu_names = tuple(g.uuid or g.pci for _, gpus in selected for g in gpus)
    _check_leases(config.state_dir, gpu_names)
    root_path = rootfs(spec, bundle)
    dev = os.path.join(root_path, "dev")
    if os.path.islink(dev):
        raise PolicyError(f"the image's /dev is a symbolic link (to {os.readlink(dev)!r}): runc follows it out of "
                          "the container when it sets up /dev, so gpuhook refuses to start this GPU container")
    # reads only, so the O_NOFOLLOW walk (os alone) serves; openat2 would cost ctypes before every GPU container
    rocm_edits, verdict_edits = Edits(), Edits()
    warnings: tuple[str, ...] = ()
    if _checks_needed(by_vendor, env, annotations):  # modules loaded only when needed
        from gpuhook import compat
        from gpuhook.safepath import InRoot

        image = InRoot(root_path, use_openat2=False) if os.path.isdir(root_path) else None
        try:
            rocm_edits, tree_version = _host_rocm(request, config, root, by_vendor, image, env)
            verdict = compat.check(selected, env, annotations, root, image, config.policy.rocm_compatibility,
                                   tree_version)
            verdict_edits, warnings = verdict.edits, verdict.warnings
        finally:
            if image:
                image.close()
    else:
        tree_version = None
    injected = edits_for(selected, request, inventory) if request.wants_gpus else Edits()
    edits = merge([verdict_edits, injected, rocm_edits, _hardening(config, root, by_vendor), Edits(env=tuning.env),
                   _tuning_hooks(config, gpuhook_bin) if tuning.touches_host() else Edits()])
    if edits.ldcache_dirs and not os.access(config.ldconfig, os.X_OK):
        raise ConfigError(f"the host's ldconfig {config.ldconfig} is missing or not executable: install "
                          "libc-bin or set `ldconfig` in " + config.path)
    for w in warnings:
        log.warning("compatibility", detail=w)
    log.info("injecting", gpus=[s.raw for s in request.selections], sources=[s.source for s in request.selections],
             capabilities=sorted(request.capabilities), devices=[n.path for n in edits.device_nodes],
             mounts=len(edits.mounts), gids=list(edits.additional_gids), host_rocm=tree_version)
    drivers = tuple((v, inv.driver_version or "") for v, (inv, _) in by_vendor.items())
    return Prepared(edits, warnings, drivers, settings, gpu_names if tuning.exclusive else (), gpu_names)


def _checks_needed(by_vendor: dict[str, Any], env: dict[str, str], annotations: dict[str, str]) -> bool:
    """Whether compatibility checks or host ROCm apply: AMD GPUs, or a stated requirement."""
    return ("amd" in by_vendor or "gpuhook.dev/require" in annotations or "CUDA_VERSION" in env
            or any(k.startswith("NVIDIA_REQUIRE_") for k in env))


def _check_leases(state_dir: str, gpus: tuple[str, ...]) -> None:
    """Refuse early (before runc) a container asking for a GPU another live container holds exclusively."""
    if not os.path.exists(os.path.join(state_dir, "ledger.json")):
        return  # no tuning on this host yet: not even the ledger module is loaded
    from gpuhook import ledger

    try:
        leases = ledger.load(os.path.join(state_dir, ledger.NAME))["leases"]
    except ledger.LedgerError:
        return  # the prestart hook reports a corrupt ledger where it matters: when tuning is asked
    for gpu in gpus:
        holder = leases.get(gpu)
        if holder and records.holder_alive(holder):
            raise PolicyError(f"GPU {gpu} is held exclusively by container {holder['id']}: wait for it to stop or "
                              "pick other GPUs")


def _tuning_hooks(config: Config, gpuhook_bin: str) -> Edits:
    """The prestart hook that applies tuning and the poststop hook that restores it (shim mode)."""
    env = (f"GPUHOOK_CONFIG={config.path}", "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
    return Edits(hooks=(Hook("prestart", gpuhook_bin, ("gpuhook", "hook", "prestart"), env),
                        Hook("poststop", gpuhook_bin, ("gpuhook", "hook", "poststop"), env)))


def _host_rocm(request: Request, config: Config, root: Root, by_vendor: dict[str, tuple[VendorInventory, Any]],
               image: Any, env: dict[str, str]) -> tuple[Edits, str | None]:
    """The host-ROCm edits (and the tree's version) when asked, or by policy for AMD containers."""
    want = request.host_rocm
    if want is None and not request.host_rocm_asked and config.policy.host_rocm and "amd" in by_vendor:
        want = HostRocm()
    if want is None:
        return Edits(), None
    if "amd" not in by_vendor:
        raise RequestError("gpuhook.dev/host-rocm mounts the host's ROCm for AMD GPUs, but this container's GPUs "
                           "are " + ", ".join(by_vendor))
    from gpuhook import hostrocm, rocm

    tree = hostrocm.choose(hostrocm.discover_trees(root), want, by_vendor["amd"][0].driver_version)
    hostrocm.check_image(rocm.image_version(image) if image else None, tree, want)
    return hostrocm.plan(tree, root.base, env), tree.version


def _hardening(config: Config, root: Root, by_vendor: dict[str, tuple[VendorInventory, Any]]) -> Edits:
    """What every GPU container gets by default ([policy] switches each off)."""
    policy = config.policy
    masked = ("/sys/class/kfd/kfd/proc",) if "amd" in by_vendor and policy.mask_kfd_proc else ()
    overlays: tuple[ProcOverlay, ...] = ()
    if "nvidia" in by_vendor and policy.nvidia_procfs:
        from gpuhook import procfs

        source = procfs.nvidia_copy(root, by_vendor["nvidia"][1], config.state_dir)
        overlays = (ProcOverlay(source, "/proc/driver/nvidia"),)
    return Edits(masked_paths=masked, readonly_mounts=("/sys",) if policy.readonly_sys else (),
                 proc_overlays=overlays)


def edited_spec(spec: Spec, bundle: str, container_id: str, table: dict[str, Any], config_path: str,
                validated: bool = False, runtime_root: str = "/run/runc") -> tuple[Spec | None, tuple[str, ...]]:
    """The spec with the container's GPUs added (None when it asks for nothing) and warnings for the user.
    Records the container under state_dir (for doctor's stale-driver report)."""
    config = from_table(table, config_path, validated)
    gpuhook_bin = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "gpuhook")
    prepared = prepare(spec, bundle, config, logs.logger(config, container_id, "shim"), gpuhook_bin)
    if prepared is None:
        return None, ()
    if (prepared.settings or prepared.exclusive) and not os.access(gpuhook_bin, os.X_OK):
        raise ConfigError(f"tuning needs the gpuhook hook next to gpuhook-runtime, but {gpuhook_bin} is missing: "
                          "reinstall gpuhook (./install.sh)")
    new = apply_edits(spec, prepared.edits, rootfs(spec, bundle), config.ldconfig)
    records.save(config.state_dir, records.ContainerRecord(container_id, prepared.drivers, runtime_root,
                                                           gpus=prepared.gpus))
    return new, prepared.warnings
