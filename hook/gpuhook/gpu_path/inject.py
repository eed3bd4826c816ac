"""The GPU path, as the shim and the hook run it: gather the facts, decide, write. Loaded only when a
request may exist.

    request (pure parse) -> [the transaction's lock] -> discovery -> the records -> survey (pure: which facts)
    -> gather (I/O) -> decide (pure) -> writers: procfs copies, then config.json (shim) or the live container
    (hook), and the record [the lock let go]: gpu_path/transaction.py
"""

from __future__ import annotations

import os
import sys

from gpuhook import logs
from gpuhook.apply import containers
from gpuhook.config import Config, from_table
from gpuhook.edits import Edits, merge
from gpuhook.errors import PlanError
from gpuhook.frozen import replace
from gpuhook.gpu_path.transaction import Transaction, ledger_view
from gpuhook.host.facts import gather
from gpuhook.host.root import Root
from gpuhook.plan.prepare import Prepared, asks, decide, survey, vendors_to_discover
from gpuhook.plan.tuning import check_policy
from gpuhook.request.container import Request, env_map, parse_request
from gpuhook.request.docker_flag import gpus_flag
from gpuhook.request.dra_claim import claims_of
from gpuhook.request.pod import pod_identity
from gpuhook.vendors.discover import discover, identified
from gpuhook.vendors.registry import all_vendors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.apply.spec import Spec


def prepare(spec: Spec, bundle: str, config: Config, log: Any, gpuhook_bin: str = "/usr/local/bin/gpuhook",
            container_id: str = "") -> Prepared | None:
    """What the container asked for, checked against the host and the image, as Edits, in a transaction that
    records nothing (the plan alone: its lock let go on return); None when it asks for nothing. Reads the host
    and the image's files, writes procfs copies under state_dir; RequestError, PlanError or PolicyError when it
    cannot start."""
    request = asked(spec, config, log, container_id)
    if request is None:
        return None
    with Transaction(config.state_dir, container_id, exclusive=counts(request)) as txn:
        return planned(request, spec, bundle, config, log, txn, gpuhook_bin)


def asked(spec: Spec, config: Config, log: Any, container_id: str = "") -> Request | None:
    """What the container asks, as the policy lets it through (an allocation claimed, DRA claims verified, the
    tuning policy checked: none of it needs the host); None when it asks for nothing. Reads and writes the
    allocation record; RequestError or PolicyError."""
    env = env_map((spec.get("process") or {}).get("env") or [])
    annotations = spec.get("annotations") or {}
    vendors = all_vendors()
    request = parse_request(annotations, env, config.policy.accept_env_requests,
                            gpus_flag(spec.get("hooks"), vendors), config.policy.gpus_any_vendor, vendors=vendors,
                            env_tuning=config.policy.env_tuning())
    markers = claims_of(spec.get("hooks"))  # DRA claims the kubelet gave, through their CDI devices
    if request.allocation or markers or config.policy.requests == "allocated":
        from gpuhook.gpu_path.granting import authorized

        request = authorized(request, annotations, config, container_id, markers)
    if not asks(request):
        log.debug("no gpu request")
        return None
    check_policy(request.tuning, config.tuning)  # before the host is read, as it needs nothing of it
    return request


def counts(request: Request) -> bool:
    """Whether the request asks for a count (count:N): its transaction holds the lock alone."""
    return any(s.count for s in request.selections)


def planned(request: Request, spec: Spec, bundle: str, config: Config, log: Any, txn: Transaction,
            gpuhook_bin: str = "/usr/local/bin/gpuhook") -> Prepared:
    """The request decided inside `txn`, its lock held (a layout change waits for this container's record, then
    sees it; a count holds it alone, so the records read here are the truth). Reads the host, the records and the
    image's files (and, for tuning, the GPUs' own ranges through the vendors' backends), writes procfs copies and
    MPS directories; PlanError or PolicyError when it cannot start, TuningError for a value a GPU cannot take."""
    from gpuhook.apply.spec import rootfs

    counted = counts(request)
    root = Root(config.host_root)
    scoped = vendors_to_discover(request)
    inventory = discover(root, scoped)
    if scoped and any(inventory.vendor(v) is None for v in scoped):  # the error will say what the host has
        inventory = discover(root)
    inventory = identified(root, inventory, tuple(i for s in request.selections for i in s.devices or ()))
    # the other live GPU containers (the records read once): a count picks around them, exclusive refuses on them
    users = txn.users() if counted or request.tuning.exclusive else ()
    if counted:
        from gpuhook.gpu_path.granting import pick_free

        request = pick_free(request, inventory, root, users, txn.container_id, txn.held())
        log.info("count picked", gpus=[i for s in request.selections for i in s.devices or ()],
                 in_use=sorted({f"{gpu}:{cid}" for gpu, cid in users}))
    needs = survey(request, inventory, spec, config)
    ledger = ledger_view(config.state_dir)
    facts = gather(needs, root, inventory.vendors, rootfs(spec, bundle), config, ledger,
                   users if request.tuning.exclusive else (), {v.NAME: v for v in all_vendors()})
    warm = os.environ.get("GPUHOOK_WARM_SOCKET")  # the hooks ask the warm helper the shim was told to ask
    prepared = decide(request, inventory, facts, spec, config, gpuhook_bin,
                      () if warm is None else (f"GPUHOOK_WARM_SOCKET={warm}",))
    if prepared.settings:  # the GPUs' own ranges, before anything is written (the prestart hook's: the last guard);
        from gpuhook.tuning.backends import check_ranges  # a value a GPU took under its driver is remembered

        check_ranges(root, config.state_dir, prepared.settings, dict(prepared.drivers))
    for directory in prepared.directories:  # before the runtime mounts them (the daemons start at prestart)
        _make_directory(config.tuning.mps_dir, directory)
    for tmpfs in prepared.shared_memory:  # a daemon's /dev/shm: the same tmpfs for it and every client
        _make_directory(config.tuning.mps_dir, tmpfs, shared=True)
    if prepared.procfs:
        from gpuhook.apply import procfs_copy

        overlays = tuple(procfs_copy.write(config.state_dir, c) for c in prepared.procfs)
        prepared = replace(prepared, edits=merge([prepared.edits, Edits(proc_overlays=overlays)]), procfs=())
    for w in prepared.warnings:
        log.warning("compatibility", detail=w)
    edits = prepared.edits
    log.info("injecting", gpus=[s.raw for s in request.selections], sources=[s.source for s in request.selections],
             capabilities=sorted(request.capabilities), devices=[n.path for n in edits.device_nodes],
             mounts=len(edits.mounts), gids=list(edits.additional_gids),
             host_rocm=prepared.host_rocm)
    return prepared


def register_device_container(spec: Spec, container_id: str, table: dict[str, Any], config_path: str,
                              validated: bool = False, runtime_root: str = "/run/runc", creator: int = 0) -> None:
    """A container with GPU device nodes but no request (`--device`, a device plugin's nodes): it is recorded
    with its GPUs, so that an exclusive request sees it, and refused while one of them is leased. The spec is
    not changed. Reads the host; writes the record."""
    from gpuhook.host.processes import start_time
    from gpuhook.plan.tuning import gpus_in_spec

    config = from_table(table, config_path, validated)
    devices = (spec.get("linux") or {}).get("devices") or []
    if not devices:
        return
    with Transaction(config.state_dir, container_id) as txn:  # shared: a layout change waits for the record
        selected = gpus_in_spec(devices, discover(Root(config.host_root)))
        gpus = tuple(g.key() for _, found in selected for g in found)
        if not gpus:
            return
        me = creator or os.getpid()  # the process the runtime runs in: it creates the container
        drivers = tuple((inv.vendor, inv.driver_version or "") for inv, _ in selected)
        record = containers.ContainerRecord(id=container_id, drivers=drivers, runtime_root=runtime_root, gpus=gpus,
                                            creator=me, creator_start=start_time(me))
        txn.commit(record, way_out="this container has its device node; wait for it to stop or give it other GPUs")


def edit_bundle(data: bytes, bundle: str, container_id: str, table: dict[str, Any], config_path: str,
                validated: bool, runtime_root: str, creator: int, asks: bool) -> tuple[str, ...]:
    """The shim's work on a bundle whose config.json (`data`) named GPUs: asked for (`asks`: config.json edited,
    atomically) or only present as device nodes (--device, another device plugin: recorded); a pod's pause
    container gets nothing. Warnings for the user. Reads the host, writes config.json and records."""
    from gpuhook.apply import spec
    from gpuhook.request.pod import is_sandbox

    spec_path = os.path.join(bundle, "config.json")
    loaded = spec.load_spec(data, spec_path)
    if is_sandbox(loaded.get("annotations") or {}):  # a pod's pause container: never GPUs, tuning or records
        return ()
    if not asks:  # GPU nodes without a request: --device, another device plugin
        register_device_container(loaded, container_id, table, config_path, validated, runtime_root, creator)
        return ()
    new, warnings = edited_spec(loaded, bundle, container_id, table, config_path, validated, runtime_root, creator)
    if new is not None:
        spec.write_atomic(spec_path, new)
    return warnings


def edited_spec(spec: Spec, bundle: str, container_id: str, table: dict[str, Any], config_path: str,
                validated: bool = False, runtime_root: str = "/run/runc",
                creator: int = 0) -> tuple[Spec | None, tuple[str, ...]]:
    """The spec with the container's GPUs added (None when it asks for nothing) and warnings for the user.
    Records the container under state_dir as created by `creator` (default: this process, which execs the
    runtime)."""
    config = from_table(table, config_path, validated)
    return _edited(spec, bundle, container_id, config, runtime_root, creator or os.getpid())


def _edited(spec: Spec, bundle: str, container_id: str, config: Config, runtime_root: str,
            me: int) -> tuple[Spec | None, tuple[str, ...]]:
    from gpuhook.apply.create_hook import NAME
    from gpuhook.apply.spec import apply_with, drop_hooks, rootfs
    from gpuhook.apply.spec_edits import SpecContext
    from gpuhook.errors import ConfigError
    from gpuhook.proc import beside
    from gpuhook.request.docker_flag import is_gpus_hook
    from gpuhook.request.dra_claim import is_claim_hook

    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    gpuhook_bin = os.path.join(here, "gpuhook")
    hook_bin = beside(here, "gpuhook-hook", gpuhook_bin)  # the hook's native front end (the warm helper, else gpuhook)
    log = logs.logger(config, container_id, "shim")
    request = asked(spec, config, log, container_id)
    if request is None:
        return None, ()
    with Transaction(config.state_dir, container_id, exclusive=counts(request)) as txn:
        prepared = planned(request, spec, bundle, config, log, txn, hook_bin)
        if (prepared.settings or prepared.exclusive) and not os.access(gpuhook_bin, os.X_OK):
            raise ConfigError(f"tuning needs the gpuhook hook next to gpuhook-runtime, but {gpuhook_bin} is "
                              "missing: reinstall gpuhook (./install.sh)")
        if _joined(prepared, config, container_id, runtime_root, me, bundle):  # held already: no prestart to tune
            prepared = replace(prepared, settings=(), edits=replace(prepared.edits, hooks=tuple(
                h for h in prepared.edits.hooks if not (h.stage == "prestart" and h.args[1:] == ("hook", "prestart")))))
        written, kept = False, ""
        if prepared.edits.ldcache_dirs:
            prepared, written, kept = _linker_cache(prepared, rootfs(spec, bundle), config, log)
        ctx = SpecContext(root_path=rootfs(spec, bundle), ldconfig=config.ldconfig, hook_timeout=config.hook_timeout,
                          state_dir=config.state_dir,
                          helper=beside(here, NAME), gpuhook_bin=gpuhook_bin,
                          config_path=config.path,  # "": a shell per copy, Python's refresh
                          ldcache_written=written)
        new = apply_with(spec, prepared.edits, ctx)
        # Docker's --gpus hook: its work is done (a hook would not know)
        drop_hooks(new, "prestart", lambda h: is_gpus_hook(h, all_vendors()))
        # a DRA claim's marker hooks: the shim's own prestart hook does their work (their poststop hook, which
        # finds nothing left to release after the shim's, stays: a hook cannot tell which one runs first)
        drop_hooks(new, "prestart", is_claim_hook)
        from gpuhook.host.processes import start_time

        pod, namespace, name = pod_identity(spec.get("annotations") or {})
        record = containers.ContainerRecord(
            id=container_id, drivers=prepared.drivers, runtime_root=runtime_root, gpus=prepared.gpus,
            creator=me, creator_start=start_time(me),  # `me` execs the runtime: it creates the container
            copies=(*(o.source for o in prepared.edits.proc_overlays), *((kept,) if kept else ())),  # gc keeps
            pod=pod, namespace=namespace, container=name, planned=True, settings=prepared.settings,
            exclusive=prepared.exclusive)
        txn.commit(record, count=prepared.drivers)
    return new, prepared.warnings


def _linker_cache(prepared: Prepared, root_path: str, config: Config, log: Any) -> tuple[Prepared, bool, str]:
    """The container's linker cache written into its root before the runtime starts (apply/container_ldcache.py),
    or kept under state_dir and bind-mounted read-only where the root's file system refuses writes: (the prepared
    edits, with that mount, whether the cache is done, and the file kept under state_dir or "": the container's
    record names it, so that gc keeps it while the container lives). Not done where the image's cache cannot be used
    and the host's ldconfig can rebuild it: the spec then gets the refresh hook (its mount point made here). Reads the
    host's libraries and the image; writes into the root or under state_dir."""
    from gpuhook.apply import container_ldcache as cache
    from gpuhook.errors import GpuhookError

    edits = prepared.edits
    mounts = [(m.host_path, m.container_path) for m in edits.mounts]
    # openat2 where ctypes is loaded already (the warm helper's workers), else the component walk: as strict,
    # without ctypes' 3 ms in the direct shim
    openat2 = None if "gpuhook.syscalls" in sys.modules else False
    try:
        kind, detail = cache.write(root_path, edits.ldcache_dirs, mounts, config.state_dir, openat2=openat2)
        if kind == cache.FALLBACK and not os.access(config.ldconfig, os.X_OK):
            log.warning("linker cache", detail=f"{detail}; no host ldconfig to rebuild it: the injected libraries "
                        "alone are listed")
            kind, detail = cache.write(root_path, edits.ldcache_dirs, mounts, config.state_dir, image=False,
                                       openat2=openat2)
    except (GpuhookError, OSError) as e:
        kind, detail = cache.FALLBACK, f"cannot be written: {e}"
    if kind == cache.FALLBACK:
        from gpuhook.apply.linker_cache import make_mountpoint

        log.warning("linker cache", detail=f"{detail}; the host's ldconfig refreshes it")
        make_mountpoint(config.state_dir)
        return prepared, False, ""
    log.debug("linker cache", kind=kind, detail=detail)
    if kind == cache.MOUNT:
        from gpuhook.edits import Mount

        bound = Edits(mounts=(Mount(detail, cache.CACHE),))  # read-only
        prepared = replace(prepared, edits=merge([prepared.edits, bound]))
        return prepared, True, detail
    return prepared, True, ""


def _joined(prepared: Prepared, config: Config, container_id: str, runtime_root: str, me: int, bundle: str) -> bool:
    """Whether every setting the container asks is held already, at its value, by live containers: then it is
    recorded here as their holder (by `me`, which execs runc, and runc's state directory `runtime_root`: runc keeps
    state.json there while the container exists and removes it before the poststop hooks), and its spec needs no
    prestart hook to tune (its poststop hook releases it). Only for runc, whose state gpuhook can read (crun keeps
    none there, and keeps its own until after the poststop hooks); never for leases or MPS daemons. Writes the
    ledger."""
    if (not prepared.settings or prepared.exclusive or any(s.name == "mps" for s in prepared.settings)
            or os.path.basename(config.runtime) != "runc" or not os.path.isabs(runtime_root)
            or not os.path.exists(os.path.join(config.state_dir, "ledger.json"))):
        return False
    from gpuhook.errors import LedgerError
    from gpuhook.host.processes import start_time
    from gpuhook.tuning import session

    try:
        return session.join(config.state_dir, session.Holder(container_id, me, start_time(me), runtime_root),
                            prepared.settings, os.path.realpath(bundle))  # as runc states it
    except LedgerError:  # the prestart hook says so, where it applies the settings
        return False


def _make_directory(base: str, path: str, shared: bool = False) -> None:
    """A host directory a mount of the container needs (an MPS daemon's pipes), root's and 0755, made below `base`
    ([tuning] mps_dir) without following a link (statefile.make_dirs), or (`shared`) a daemon's shared memory,
    a bounded tmpfs of its own (statefile.make_shared_memory); PlanError when something else is in its place.
    Writes directories; mounts a tmpfs."""
    from gpuhook.errors import UnsafePathError
    from gpuhook.statefile import make_dirs, make_shared_memory

    try:
        if shared:
            make_shared_memory(base, path)
        else:
            make_dirs(base, path)
    except UnsafePathError as e:
        raise PlanError(f"{e}: gpuhook will not mount it into a container") from e
