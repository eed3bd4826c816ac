"""`gpuhook hook [prestart|createRuntime|poststop]`: the OCI hook. Reads the container state on stdin.

prestart/createRuntime compute the same edits as the shim and apply what the spec does not already carry,
live, inside the container; poststop releases what hook mode holds (nothing yet: tuning and leases come
later) and never fails the container's removal.
"""

from __future__ import annotations

import json
import os
import sys

from gpuhook import logs
from gpuhook.config import load
from gpuhook.errors import GpuhookError, SpecError

STAGES = ("prestart", "createRuntime", "poststop")


def main(stage: str | None) -> int:
    """Run one hook stage (detected from the state's status when not given); 0 on success."""
    try:
        state = json.load(sys.stdin)
    except ValueError as e:
        print(f"gpuhook hook: the OCI state on stdin is not JSON ({e})", file=sys.stderr)
        return 1
    stage = stage or ("poststop" if state.get("status") == "stopped" else "prestart")
    if stage == "poststop":
        return _poststop(state)
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
    from gpuhook import inject, live
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
    prepared = inject.prepare(spec, bundle, config, log)
    if prepared is None:
        return
    for w in prepared.warnings:
        print(f"gpuhook hook: warning: {w}", file=sys.stderr)
    todo = live.remaining(prepared.edits, spec)
    user = (spec.get("process") or {}).get("user") or {}
    gids = {int(user.get("gid", 0)), *(int(g) for g in user.get("additionalGids") or [])}
    live.apply(todo, pid, rootfs(spec, bundle), config.host_root, config.ldconfig, int(user.get("uid", 0)), gids)
    log.info("applied live", devices=[n.path for n in todo.device_nodes], mounts=len(todo.mounts),
             rules=len(todo.device_rules))


def _poststop(state: dict[str, object]) -> int:
    """Never fails: a container's removal must not depend on gpuhook."""
    try:
        config = load()
        logs.logger(config, str(state.get("id", "")), "hook").info("poststop")
    except GpuhookError as e:
        print(f"gpuhook hook: poststop: {e} (ignored)", file=sys.stderr)
    return 0
