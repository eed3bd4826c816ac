"""`gpuhook hook [prestart|createRuntime|poststop|update-ldcache]`: the OCI hook. Reads the state on stdin.

prestart/createRuntime compute the same edits as the shim, apply what the spec does not already carry, live,
inside the container, then take the container's leases and apply its tuning; poststop releases them and
restores, and never fails the container's removal; update-ldcache is CDI's linker-cache hook.
"""

from __future__ import annotations

import os
import sys

from gpuhook import fastjson, logs, records
from gpuhook.config import Config, load
from gpuhook.errors import GpuhookError, SpecError

TYPE_CHECKING = False  # runc waits for every hook: typing, and the GPU path's modules on poststop, cost time
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.inject import Prepared

STAGES = ("prestart", "createRuntime", "poststop", "update-ldcache")


def main(stage: str | None, folders: list[str] | None = None) -> int:
    """Run one hook stage (detected from the state's status when not given); 0 on success."""
    try:
        state = fastjson.loads(sys.stdin.buffer.read())
    except ValueError as e:
        print(f"gpuhook hook: the OCI state on stdin is not JSON ({e})", file=sys.stderr)
        return 1
    stage = stage or ("poststop" if state.get("status") == "stopped" else "prestart")
    if stage == "poststop":
        return _poststop(state)
    if stage == "update-ldcache":
        try:
            _update_ldcache(state, folders or [])
        except (GpuhookError, OSError) as e:
            print(f"gpuhook hook update-ldcache: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        _prestart(state)
    except GpuhookError as e:
        print(f"gpuhook hook: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"gpuhook hook: {e}", file=sys.stderr)
        return 1
    return 0


def _prestart(state: dict[str, object]) -> None:
    from gpuhook import live
    from gpuhook.inject import prepare
    from gpuhook.spec import load_spec, rootfs

    bundle = str(state.get("bundle") or "")
    pid = state.get("pid")
    if not bundle or not isinstance(pid, int):
        raise SpecError("the OCI state on stdin lacks the bundle or the container's pid")
    path = os.path.join(bundle, "config.json")
    try:
        with open(path, "rb") as f:
            spec = load_spec(f.read(), path)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from e
    config = load()
    log = logs.logger(config, str(state.get("id", "")), "hook")
    prepared = prepare(spec, bundle, config, log)
    if prepared is None:
        return
    warnings = list(prepared.warnings)
    todo = live.remaining(prepared.edits, spec)
    if prepared.edits.env and not _env_present(spec, prepared.edits.env):
        warnings.append("a hook cannot change the container's environment (" + ", ".join(
            e.split("=", 1)[0] for e in prepared.edits.env) + "): ROCm is mounted at /opt/rocm, where it is "
                        "found by default; use gpuhook-runtime to have these set")
    for w in warnings:
        print(f"gpuhook hook: warning: {w}", file=sys.stderr)  # runc shows a hook's stderr only on failure
        log.warning("hook", detail=w)
    user = (spec.get("process") or {}).get("user") or {}
    gids = {int(user.get("gid", 0)), *(int(g) for g in user.get("additionalGids") or [])}
    live.apply(todo, pid, rootfs(spec, bundle), config.host_root, config.ldconfig, int(user.get("uid", 0)), gids)
    cid = str(state.get("id", ""))
    records.save(config.state_dir, records.ContainerRecord(cid, prepared.drivers, "", pid, records.start_time(pid),
                                                           prepared.gpus))
    log.info("applied live", devices=[n.path for n in todo.device_nodes], mounts=len(todo.mounts),
             rules=len(todo.device_rules))
    if prepared.settings or prepared.exclusive:
        _tune(config, cid, pid, prepared, log)


def _tune(config: Config, cid: str, pid: int, prepared: Prepared, log: Any) -> None:
    """Leases and settings for this container, all or nothing (tune.acquire rolls back on failure)."""
    from gpuhook import tune
    from gpuhook.backends import BackendSet
    from gpuhook.root import Root

    root = Root(config.host_root)

    def users(gpu: str) -> list[str]:
        return [r.id for r in records.live_records(config.state_dir) if gpu in r.gpus]

    with BackendSet(root) as backends:  # a vendor's GPUs are discovered only if its backend is needed
        tune.acquire(config.state_dir, tune.Holder(cid, pid, records.start_time(pid)), prepared.settings,
                     prepared.exclusive, backends, users)
    log.info("tuned", settings=[f"{s.gpu}:{s.name}={s.value}" for s in prepared.settings],
             exclusive=list(prepared.exclusive))


def _env_present(spec: dict[str, object], env: tuple[str, ...]) -> bool:
    process = spec.get("process")
    have = set(process.get("env") or []) if isinstance(process, dict) else set()
    return all(e in have for e in env)


def _update_ldcache(state: dict[str, object], folders: list[str]) -> None:
    """CDI's createContainer hook: the host's ldconfig, chrooted into the container root, lists `folders`."""
    from gpuhook.proc import run
    from gpuhook.spec import load_spec, rootfs

    bundle = str(state.get("bundle") or "")
    path = os.path.join(bundle, "config.json")
    with open(path, "rb") as f:
        spec = load_spec(f.read(), path)
    run([load().ldconfig, "-r", rootfs(spec, bundle), *folders], timeout=30)


def _poststop(state: dict[str, object]) -> int:
    """Releases the container's tuning and leases. Never fails: a container's removal must not depend on
    gpuhook; what cannot be restored now stays in the ledger for `gpuhook gc`."""
    cid = str(state.get("id", ""))
    try:
        config = load()
        log = logs.logger(config, cid, "hook")
        problems = _untune(config, cid)
        for p in problems:
            log.error("restore failed", detail=p)
        log.info("poststop", problems=len(problems))
    except (GpuhookError, OSError) as e:
        print(f"gpuhook hook: poststop: {e} (left for gpuhook gc)", file=sys.stderr)
    return 0


def _untune(config: Config, cid: str) -> list[str]:
    if not os.path.exists(os.path.join(config.state_dir, "ledger.json")):
        return []
    from gpuhook import tune
    from gpuhook.backends import BackendSet
    from gpuhook.root import Root

    root = Root(config.host_root)
    with BackendSet(root) as backends:  # a vendor's GPUs are discovered only if its backend is needed
        return tune.release(config.state_dir, cid, backends)
