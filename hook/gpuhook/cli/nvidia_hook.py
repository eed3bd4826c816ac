"""nvidia-container-runtime-hook: the executable Docker's `--gpus` runs, shipped by gpuhook.

dockerd registers its "nvidia" device driver only when an executable of this name is on its PATH as it starts;
`--gpus` then adds `nvidia-container-runtime-hook prestart` to the container's prestart hooks with the request in
NVIDIA_VISIBLE_DEVICES (request.docker_flag). gpuhook's hook takes NVIDIA's command line (`prestart`,
`poststart`, `poststop`; `-config FILE`, `-debug` accepted and ignored: they are NVIDIA's settings; `-version`):

- gpuhook-runtime as the container's runtime: the shim has done the work and drops this hook from the spec; if
  the hook runs anyway (the shim recorded the container) it does nothing;
- plain runc: `gpuhook hook prestart`, hook mode, on the same request (with [policy] gpus_any_vendor, AMD GPUs on
  an AMD-only host). Its state and config rules are the hook's: GPUHOOK_CONFIG or /etc/gpuhook/config.toml.
A hook on every --gpus container's start: os, sys and the hook's own path only (gpuhook.startup).
"""

from __future__ import annotations

import sys

from gpuhook import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

NAME = "nvidia-container-runtime-hook"
_VALUE_FLAGS = ("config",)  # NVIDIA's flags that take a value
_BOOL_FLAGS = ("debug", "version")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of nvidia-container-runtime-hook; 0 on success, 2 for a command line it does not know."""
    args = list(sys.argv[1:] if argv is None else argv)
    flags, command = _parse(args)
    if flags is None:
        return _usage(f"unknown flag in {' '.join(args)!r}")
    if "version" in flags:
        print(f"{NAME} (gpuhook {__version__}, compatible with NVIDIA Container Runtime Hook)")
        return 0
    if command in ("poststart", "poststop"):
        return 0  # nothing to undo: hook mode's records are pruned once their container is gone
    if command != "prestart":
        return _usage(f"unknown command {command!r}" if command else "no command")
    from gpuhook.cli.hook import MAX_STATE
    from gpuhook.cli.hook import main as hook

    data = sys.stdin.buffer.read(MAX_STATE)
    return 0 if _shim_did_it(data) else hook("prestart", data=data)


def _parse(args: list[str]) -> tuple[set[str] | None, str]:
    """Go flag syntax as NVIDIA's hook has it: -flag, --flag, -flag=value, -flag value; flags stop at the command."""
    flags: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        name, eq, _ = args[i].lstrip("-").partition("=")
        if name in _VALUE_FLAGS and not eq:
            i += 1  # its value is the next word
        elif name not in _VALUE_FLAGS and name not in _BOOL_FLAGS:
            return None, ""
        flags.add(name)
        i += 1
    return flags, args[i] if i < len(args) else ""


def _shim_did_it(data: bytes) -> bool:
    """Whether gpuhook's shim prepared this container (it recorded it): then its GPUs are in already."""
    from gpuhook import fastjson
    from gpuhook.apply.containers import recorded
    from gpuhook.config import load
    from gpuhook.errors import GpuhookError

    try:
        state = fastjson.loads(data)
        cid = state.get("id") if isinstance(state, dict) else None
        return isinstance(cid, str) and bool(cid) and recorded(load().state_dir, cid)
    except (GpuhookError, OSError, ValueError, RecursionError):
        return False  # the hook itself reports what is wrong with the state or the config


def _usage(problem: str) -> int:
    print(f"{NAME}: {problem}\nusage: {NAME} [-config FILE] [-debug] prestart|poststart|poststop   (or -version)",
          file=sys.stderr)
    return 2
