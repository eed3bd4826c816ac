"""Which DRA claims a container was given, as they reach its OCI spec. Pure.

The kubelet hands a container the CDI devices of the claims' requests it uses; the engine (containerd, CRI-O)
applies them before the runtime sees the spec. Every CDI device gpuhook's DRA driver writes carries, with the
GPU's edits, a prestart hook `gpuhook-hook hook prestart --claim <claim uid>/<request>`. Hooks come only from the
engine's own configuration, hooks.d, NRI or CDI, never from a pod's spec, so the marker is the kubelet's word:
the runtime reads it here, and verifies the claim against the driver's record (gpu_path/granting.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

OPTION = "--claim"
_HOOKS = ("gpuhook", "gpuhook-hook")
_MAX_UID = 64  # a UID is 36 characters
_MAX_REQUEST = 63  # a DNS label


def marker_args(uid: str, request: str) -> list[str]:
    """The arguments after `<hook> hook prestart` that name one claim's request."""
    return [OPTION, f"{uid}/{request}"]


def is_claim_hook(hook: object) -> bool:
    """Whether one OCI hook entry is a claim's marker (the shim drops them: its own hooks do their work)."""
    return _marker(hook) is not None


def claims_of(hooks: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(claim uid, its requests) for every claim marker among the spec's prestart `hooks`, in their order."""
    found: dict[str, list[str]] = {}
    for uid, request in _markers(hooks):
        if request not in found.setdefault(uid, []):
            found[uid].append(request)
    return tuple((uid, tuple(requests)) for uid, requests in found.items())


def _markers(hooks: object) -> Iterator[tuple[str, str]]:
    prestart = hooks.get("prestart") if isinstance(hooks, dict) else None
    for hook in prestart if isinstance(prestart, list) else ():
        marker = _marker(hook)
        if marker is not None:
            yield marker


def _marker(hook: object) -> tuple[str, str] | None:
    """(uid, request) of a marker hook: gpuhook's hook (by file name) with `--claim UID/REQUEST` in its args."""
    if not isinstance(hook, dict) or not isinstance(hook.get("path"), str):
        return None
    args = hook.get("args")
    if hook["path"].rpartition("/")[2] not in _HOOKS or not isinstance(args, list) or OPTION not in args:
        return None
    at = args.index(OPTION)
    value = args[at + 1] if at + 1 < len(args) else None
    if not isinstance(value, str):
        return None
    uid, _, request = value.partition("/")
    if not uid or not request or len(uid) > _MAX_UID or len(request) > _MAX_REQUEST or "/" in request:
        return None
    return uid, request
