"""Docker's `--gpus` (and Compose's device reservations), as they reach the OCI spec. Pure.

dockerd turns the flag into its "nvidia" device driver's edits: the vendor's env key (NVIDIA_VISIBLE_DEVICES=all,
`0,1` for a count, or the device ids as given), NVIDIA_DRIVER_CAPABILITIES when capabilities are named, and a
prestart hook named nvidia-container-runtime-hook (looked up on dockerd's PATH when it starts; without one the flag
fails with `could not select device driver "" with capabilities: [[gpu]]`). The hook is how gpuhook tells the
flag's request from an env key the image merely carries.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.request.terms import Terms

SOURCE = "--gpus"  # what messages name as the source of a request the flag made


def gpus_flag(hooks: object, vendors: Sequence[Terms]) -> str | None:
    """The one of `vendors` whose Docker --gpus hook is among the spec's prestart `hooks`, if any."""
    names = {v.DOCKER_GPUS_HOOK: v.NAME for v in vendors if v.DOCKER_GPUS_HOOK}
    prestart = hooks.get("prestart") if isinstance(hooks, dict) else None
    for hook in prestart if isinstance(prestart, list) else ():
        for name in _names(hook):
            if name in names:
                return names[name]
    return None


def is_gpus_hook(hook: object, vendors: Sequence[Terms]) -> bool:
    """Whether one OCI hook entry is the Docker --gpus hook of one of `vendors` (the shim drops it once it did
    the work)."""
    return bool({v.DOCKER_GPUS_HOOK for v in vendors if v.DOCKER_GPUS_HOOK} & set(_names(hook)))


def _names(hook: object) -> tuple[str, ...]:
    """The names a hook entry goes by: its executable's file name and its argv[0]."""
    if not isinstance(hook, dict):
        return ()
    path, args = hook.get("path"), hook.get("args")
    return (path.rpartition("/")[2] if isinstance(path, str) else "",
            args[0] if isinstance(args, list) and args and isinstance(args[0], str) else "")
