"""The hook's stages, as the OCI hook (cli/hook.py), Docker's --gpus hook and the warm workers run them:
prestart (the container's GPUs given live, its record, then its tuning), update-ldcache (CDI's linker-cache
refresh) and poststop (tuning released and restored). Each raises GpuhookError, OSError or ValueError; the
command line turns them into its one line."""

from __future__ import annotations

import os
import sys

from gpuhook import logs
from gpuhook.apply import containers
from gpuhook.config import Config, load
from gpuhook.configfile import remember_state
from gpuhook.errors import GpuhookError, PolicyError, SpecError
from gpuhook.frozen import replace
from gpuhook.host.processes import start_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.apply.spec import Spec
    from gpuhook.gpu_path.transaction import Transaction
    from gpuhook.plan.prepare import Prepared
    from gpuhook.vendors.contract import Setting


def prestart(state: dict[str, object], claimed: bool = False) -> None:
    """The container of OCI state `state` given what it asks for, live (in its namespaces), its record saved,
    then its tuning applied. `claimed`: run as a DRA claim's marker hook, of which a container may carry several
    (one per claim request): the first gives it all, the others find its record. Reads the bundle and the host;
    mounts, writes state files, tunes GPUs."""
    from gpuhook.apply.spec import read_spec
    from gpuhook.request.pod import is_sandbox

    bundle, pid = state.get("bundle"), state.get("pid")
    if not isinstance(bundle, str) or not bundle or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise SpecError("the OCI state on stdin lacks the bundle or the container's pid (or they are not a string "
                        "and a number)")
    spec = read_spec(bundle)
    if is_sandbox(spec.get("annotations") or {}):  # a pod's pause container: never GPUs, tuning or records
        return
    config = load()
    remember_state(config.path, config.state_dir)  # for the native hook's poststop (native/hook.c)
    cid = str(state.get("id", ""))
    log = logs.logger(config, cid, "hook")
    shims = containers.planned(config.state_dir, cid)
    if shims is not None:  # the shim edited config.json and planned the tuning: apply that plan
        _follow(spec, config, cid, pid, shims, log)
        return
    if claimed and containers.recorded(config.state_dir, cid):  # an earlier marker hook gave the claims
        return
    from gpuhook.gpu_path.inject import asked, counts, planned  # hook mode: the GPU path (the shim's is above)
    from gpuhook.gpu_path.transaction import Transaction

    request = asked(spec, config, log, cid)
    if request is None:
        return
    with Transaction(config.state_dir, cid, exclusive=counts(request)) as txn:  # to the end of its tuning
        prepared = planned(request, spec, bundle, config, log, txn)
        _check_undone(spec, prepared.settings, prepared.exclusive)
        _give(spec, bundle, config, pid, prepared, log, txn)


def _check_undone(spec: Spec, settings: tuple[Setting, ...], exclusive: tuple[str, ...]) -> None:
    """PolicyError where the container has tuning and no gpuhook poststop hook to undo it."""
    if (settings or exclusive) and not _undone_at_poststop(spec):
        asked = ", ".join(sorted({s.name for s in settings} | ({"exclusive"} if exclusive else set())))
        raise PolicyError(f"tuning ({asked}) needs gpuhook's poststop hook to be undone, and this container has "
                          "none (Docker's --gpus hook is prestart only): run it with --runtime gpuhook, which "
                          "adds it, or register gpuhook's hooks for both stages (gpuhook configure podman)")


def _follow(spec: Spec, config: Config, cid: str, pid: int, shims: containers.ContainerRecord, log: Any) -> None:
    """A container the shim prepared: its edits are in config.json already (nothing to give live), the shim
    counted it; its record by its init process, then the tuning the shim planned. Writes state files, tunes
    GPUs."""
    from gpuhook.gpu_path.transaction import Transaction

    _check_undone(spec, shims.settings, shims.exclusive)
    started = start_time(pid)
    record = replace(shims, runtime_root="", pid=pid, start_time=started, creator=0, creator_start="",
                     planned=False, settings=(), exclusive=())
    tuned = bool(shims.settings or shims.exclusive)
    with Transaction(config.state_dir, cid, locked=False) as txn:  # the shim held the lock over its plan
        # a tuned container's leases are checked again under the ledger's lock, where it applies its tuning
        txn.commit(record, recheck=not tuned)
    log.info("planned by the shim", gpus=list(shims.gpus))
    if tuned:  # the shim checked these values against the GPUs' ranges, under these drivers: remembered
        try:
            _tune(config, cid, pid, shims.settings, shims.exclusive, log, started, shims.gpus, dict(shims.drivers))
        except PolicyError:
            containers.remove(config.state_dir, record)  # refused on a lease: as a record's commit is
            raise


def _undone_at_poststop(spec: Spec) -> bool:
    """Whether the spec runs gpuhook at poststop (gpuhook or its native hook front end), which restores tuning."""
    hooks = spec.get("hooks")
    poststop = hooks.get("poststop") if isinstance(hooks, dict) else None
    return any(isinstance(h, dict) and isinstance(h.get("path"), str)
               and os.path.basename(h["path"]) in ("gpuhook", "gpuhook-hook")
               for h in (poststop if isinstance(poststop, list) else ()))


def _give(spec: Spec, bundle: str, config: Config, pid: int, prepared: Prepared, log: Any,
          txn: Transaction) -> None:
    """The prepared edits into the running container, its record (committed in `txn`), then its tuning. Enters
    its namespaces."""
    from gpuhook.apply import live
    from gpuhook.apply.spec import rootfs
    from gpuhook.apply.spec_edits import lacking

    warnings = list(prepared.warnings)
    todo = lacking(prepared.edits, spec)
    if todo.env:
        warnings.append("a hook cannot change the container's environment (" + ", ".join(
            e.split("=", 1)[0] for e in todo.env) + "): ROCm is mounted at /opt/rocm and an MPS daemon's pipes "
                        "at /tmp/nvidia-mps, where they are found by default; use gpuhook-runtime (or a claim's CDI "
                        "spec) to have these set")
    for w in warnings:
        print(f"gpuhook hook: warning: {w}", file=sys.stderr)  # runc shows a hook's stderr only on failure
        log.warning("hook", detail=w)
    user = (spec.get("process") or {}).get("user") or {}
    gids = {int(user.get("gid") or 0), *(int(g or 0) for g in user.get("additionalGids") or [])}  # null: 0 to runc
    swap = live.apply(todo, pid, rootfs(spec, bundle), config.host_root, config.ldconfig, int(user.get("uid") or 0),
                      gids, config.hook_timeout, config.state_dir, prepared.edits.mounts, spec)
    if swap is not None:  # cgroup v2: the runtime's device filter replaced by gpuhook's
        log.info("device filter", cgroup=swap.cgroup, old=list(swap.old), new=swap.new)
    from gpuhook.request.pod import pod_identity

    pod, namespace, name = pod_identity(spec.get("annotations") or {})
    cid = txn.container_id
    record = containers.ContainerRecord(id=cid, drivers=prepared.drivers, runtime_root="", pid=pid,
                                        start_time=start_time(pid), gpus=prepared.gpus,
                                        copies=tuple(o.source for o in prepared.edits.proc_overlays), pod=pod,
                                        namespace=namespace, container=name)
    by_shim = txn.recorded()  # then the shim prepared it, and counted it
    # an exclusive holder checks the records under the ledger's lock
    txn.commit(record, recheck=not prepared.exclusive, count=() if by_shim else prepared.drivers)
    log.info("applied live", devices=[n.path for n in todo.device_nodes], mounts=len(todo.mounts),
             rules=len(todo.device_rules))
    if prepared.settings or prepared.exclusive:
        _tune(config, cid, pid, prepared.settings, prepared.exclusive, log, record.start_time, (),
              dict(prepared.drivers))


def _tune(config: Config, cid: str, pid: int, settings: tuple[Setting, ...], exclusive: tuple[str, ...],
          log: Any, started: str, used: tuple[str, ...], drivers: dict[str, str]) -> None:
    """Leases and settings for this container, all or nothing (session.acquire rolls back on failure), in one
    ledger transaction and at most one backend session per vendor. `used`: its record's GPUs, whose leases are
    checked there; `drivers`: vendor -> driver version, the key of what the GPUs' ranges took (tuning/backends)."""
    from gpuhook.host.root import Root
    from gpuhook.tuning import session
    from gpuhook.tuning.backends import BackendSet

    def users(gpu: str) -> list[str]:
        return [r.id for r in containers.live_records(config.state_dir) if gpu in r.gpus]

    # a vendor's backend is made only if needed: not for settings other containers hold already
    with BackendSet(Root(config.host_root), config.state_dir, drivers) as backends:
        session.acquire(config.state_dir, session.Holder(cid, pid, started), settings, exclusive, backends, users,
                        used)
    log.info("tuned", settings=[f"{s.gpu}:{s.name}={s.value}" for s in settings], exclusive=list(exclusive))


def update_ldcache(state: dict[str, object], folders: list[str], mounts: list[tuple[str, str]] | None) -> None:
    """CDI's createContainer hook (and the shim's fallback where the native helper is not built): the container's
    linker cache written to list `folders` (linker_cache.update; the host's ldconfig, chrooted into the container root
    alone with `mounts` bound back read-only, only where the image's cache cannot be used).
    A CDI spec written before the mounts were named (`mounts` None) gets its driver files bound back: the spec's
    bind mounts of regular files (a directory there may be a user's volume, which the refresh must not see)."""
    from gpuhook.apply.linker_cache import update
    from gpuhook.apply.spec import read_spec, rootfs

    bundle = state.get("bundle")
    if not isinstance(bundle, str) or not bundle:
        raise SpecError("the OCI state on stdin lacks the bundle (or it is not a string)")
    spec = read_spec(bundle)
    config = load()
    if mounts is None:
        mounts = [(m["source"], m["destination"]) for m in spec.get("mounts") or []
                  if isinstance(m.get("source"), str) and isinstance(m.get("destination"), str)
                  and os.path.isfile(m["source"])]
    done = update(rootfs(spec, bundle), config.ldconfig, tuple(folders), mounts, config.state_dir,
                  config.hook_timeout)
    logs.logger(config, str(state.get("id", "")), "hook").info("linker cache", detail=done)


def poststop(state: dict[str, object]) -> int:
    """Releases the container's tuning and leases. Never fails: a container's removal must not depend on
    gpuhook; what cannot be restored now stays in the ledger for `gpuhook gc`."""
    found = state.get("id")
    cid = found if isinstance(found, str) else ""
    try:
        config = load()
        remember_state(config.path, config.state_dir)
        log = logs.logger(config, cid, "hook")
        containers.drop_gone(config.state_dir, cid)
        problems = _untune(config, cid, str(state.get("bundle") or ""))
        for p in problems:
            log.error("restore failed", detail=p)
        log.info("poststop", problems=len(problems))
    except (GpuhookError, OSError, ValueError, TypeError, KeyError) as e:  # whatever it was given: exit 0
        print(f"gpuhook hook: poststop: {e} (left for gpuhook gc)", file=sys.stderr)
    return 0


def _untune(config: Config, cid: str, bundle: str) -> list[str]:
    if not os.path.exists(os.path.join(config.state_dir, "ledger.json")):
        return []
    from gpuhook.host.root import Root
    from gpuhook.tuning import session
    from gpuhook.tuning.backends import BackendSet

    with BackendSet(Root(config.host_root), config.state_dir) as backends:  # a vendor's backend is made only if needed
        return session.release(config.state_dir, cid, backends, only_gone=True, bundle=bundle)
