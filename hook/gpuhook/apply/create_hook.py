"""The native createContainer hook's command line (cli/native/createhook.c): one process per container for its
procfs copies and its linker-cache refresh, instead of a shell + mount(8) per copy and a helper for the cache.

    gpuhook-createhook ROOT [--proc SRC TARGET]... [--ldcache MOUNTPOINT LDCONFIG N SRC DST ... DIR...]

Edits write their parts one at a time (edits.py: each field its own writer); `add` folds a part into the one
hook the container has for its root, so that the spec ends with a single process whatever the field order.
The readers here give the parts back, for what a spec already carries. Pure.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "gpuhook-createhook"  # beside gpuhook-runtime and gpuhook
ENV = ("PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C")  # fixed: nothing of the engine's reaches the helper


def proc_part(source: str, target: str) -> list[str]:
    """A procfs copy: `source` holds the copy of `target`'s directory."""
    return ["--proc", source, target]


def ldcache_part(mountpoint: str, ldconfig: str, pairs: list[tuple[str, str]], dirs: tuple[str, ...]) -> list[str]:
    """The linker-cache refresh: gpuhook's library mounts (`pairs`) bound back, `dirs` listed."""
    return ["--ldcache", mountpoint, ldconfig, str(len(pairs)), *(p for pair in pairs for p in pair), *dirs]


def add(hooks: list[dict[str, Any]], helper: str, root: str, part: list[str], timeout: int) -> None:
    """Fold `part` into the helper's hook for `root` in `hooks` (a createContainer list), or append a new hook.
    A second refresh part is never folded (the refresh must come last and once): it gets its own hook."""
    for h in hooks:
        args = h.get("args") or []
        if h.get("path") != helper or args[:2] != [NAME, root]:
            continue
        procs, refresh = _split(args)
        if part[0] == "--proc":
            h["args"] = [NAME, root, *procs, *part, *refresh]
            return
        if not refresh:
            h["args"] = [*args, *part]
            return
    hooks.append({"path": helper, "args": [NAME, root, *part], "env": list(ENV), "timeout": timeout})


def proc_targets(hook: dict[str, Any]) -> list[str]:
    """The procfs targets a helper hook covers ([] for any other hook)."""
    args = hook.get("args") or []
    if args[:1] != [NAME]:
        return []
    procs, _ = _split(args)
    return [procs[i + 2] for i in range(0, len(procs), 3)]


def ldcache_dirs(hook: dict[str, Any]) -> tuple[str, ...] | None:
    """The directories a helper hook's refresh lists; None without a refresh part."""
    args = hook.get("args") or []
    if args[:1] != [NAME]:
        return None
    _, refresh = _split(args)
    if len(refresh) < 4 or not refresh[3].isdigit():
        return None
    return tuple(refresh[4 + 2 * int(refresh[3]):])


def _split(args: list[str]) -> tuple[list[str], list[str]]:
    """(the --proc groups, the --ldcache part) of a helper's argument list."""
    i = 2
    while i + 2 < len(args) and args[i] == "--proc":
        i += 3
    return args[2:i], args[i:]
