"""`gpuhook hook [prestart|createRuntime|poststop|update-ldcache]`: the OCI hook. Reads the state on stdin.

prestart/createRuntime compute the same edits as the shim, apply what the spec does not already carry, live,
inside the container, then take the container's leases and apply its tuning; poststop releases them and
restores, and never fails the container's removal (its native front end, native/hook.c, answers a poststop
itself where no tuning ledger exists); update-ldcache is CDI's linker-cache hook. Every stage
reports a failure as one line on stderr (runc shows it, and puts it in its log) and a non-zero exit.
"""

from __future__ import annotations

import sys

from gpuhook import fastjson
from gpuhook.config import load
from gpuhook.errors import GpuhookError, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


STAGES = ("prestart", "createRuntime", "poststop", "update-ldcache")
MAX_STATE = 1 << 20  # runc's state is a few hundred bytes; more is not a state


def parse(args: Sequence[str]) -> tuple[str | None, list[str], list[tuple[str, str]], bool] | None:
    """`hook [STAGE] [--folder DIR]... [--mount SOURCE DESTINATION]... [--claim UID/REQUEST]...` read by hand (the
    hot path, the admin CLI's and the warm workers', loads no argparse): (stage, folders, mounts, whether a DRA
    claim's marker hook runs: the stage reads every marker from the spec, request/dra_claim.py); None for anything
    else (argparse then says what is wrong)."""
    if list(args[:1]) != ["hook"]:
        return None
    rest = list(args[1:])
    stage = None
    if rest and not rest[0].startswith("-"):
        if rest[0] not in STAGES:
            return None
        stage = rest.pop(0)
    folders: list[str] = []
    mounts: list[tuple[str, str]] = []
    claimed = False
    while rest:
        option = rest.pop(0)
        if option == "--folder" and rest:
            folders.append(rest.pop(0))
        elif option == "--mount" and len(rest) >= 2:
            mounts.append((rest.pop(0), rest.pop(0)))
        elif option == "--claim" and rest and stage == "prestart":
            rest.pop(0)
            claimed = True
        else:
            return None
    return stage, folders, mounts, claimed


def main(stage: str | None, folders: list[str] | None = None, data: bytes | None = None,
         mounts: list[tuple[str, str]] | None = None, claimed: bool = False) -> int:
    """Run one hook stage (detected from the state's status when not given) on the OCI state on stdin (or `data`,
    already read from it); 0 on success. `folders` and `mounts`: update-ldcache's directories and library mounts;
    `claimed`: a DRA claim's marker hook (one per claim request: the first does the work for all)."""
    try:
        state = fastjson.loads(sys.stdin.buffer.read(MAX_STATE) if data is None else data)
        if not isinstance(state, dict):
            raise ValueError("not a JSON object")
    except (ValueError, RecursionError) as e:
        if stage == "poststop":  # a container's removal never waits on gpuhook
            print(f"gpuhook hook: poststop: the OCI state on stdin is not a JSON object ({e})", file=sys.stderr)
            return 0
        print(f"gpuhook hook: the OCI state on stdin is not a JSON object ({e})", file=sys.stderr)
        _count_refusal(e)  # the container does not start: a refusal like any other
        return 1
    stage = stage or ("poststop" if state.get("status") == "stopped" else "prestart")
    from gpuhook.host.userns import own_host_uid

    host_uid = own_host_uid()  # not 0: a rootless engine's hook, which plan/rootless.py refuses what needs root
    if stage == "poststop":
        if host_uid:  # its prestart applied nothing: nothing to restore
            return 0
        from gpuhook.gpu_path.hook_stages import poststop

        return poststop(state)
    from gpuhook.gpu_path import hook_stages

    name = "gpuhook hook update-ldcache" if stage == "update-ldcache" else "gpuhook hook"
    if host_uid:
        from gpuhook.plan import rootless

        annotations = state.get("annotations")
        try:
            rootless.check(annotations if isinstance(annotations, dict) else {}, host_uid,
                           "" if stage == "update-ldcache" else "gpuhook's hook")
        except GpuhookError as e:  # not counted: the counters are root's, in state_dir
            print(f"{name}: {one_line(e)}", file=sys.stderr)
            return 1
    try:
        if stage == "update-ldcache":
            hook_stages.update_ldcache(state, folders or [], mounts)
        else:
            hook_stages.prestart(state, claimed)
    except (GpuhookError, OSError, ValueError) as e:
        print(f"{name}: {one_line(e)}", file=sys.stderr)
        _count_refusal(e)
        return 1
    except Exception as e:  # fail closed, as the shim does: one line, counted, never a traceback
        print(f"{name}: internal error ({type(e).__name__}: {one_line(e)}); the container was not "
              "given GPUs, please report this", file=sys.stderr)
        _count_refusal(e)
        return 1
    return 0


def _count_refusal(error: BaseException) -> None:
    """The container is refused: count it by the error's class, in the config's state_dir (a config that cannot
    be read is not counted: its state_dir is unknown). Appends to a state file; never raises."""
    from gpuhook.apply import counters

    try:
        state_dir = load().state_dir
    except (GpuhookError, OSError, ValueError):
        return
    counters.bump(state_dir, counters.REFUSED, counters.reason(error))
