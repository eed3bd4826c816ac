"""`gpuhook doctor`'s account of the paths this host's containers take, and why: the native front ends (built,
current), the warm helper (answering or not), else Python. Each finding is (level, what[, fix])."""

from __future__ import annotations

import os

_NATIVE_COST = {"gpuhook-runtime": "every container, even one that asks for no GPU, starts Python (about twice bare "
                                   "runc's create/start/delete) and the warm helper is never reached",
                "gpuhook-hook": "each gpuhook hook (tuning, hook mode) starts Python (~30-60 ms) instead of a warm "
                                "worker",
                "gpuhook-createhook": "each GPU container's linker cache and procfs copies take a Python hook or a "
                                      "shell per copy (~20-40 ms)"}
_REBUILD = "run install.sh again where a C compiler is (apt-get install gcc libc6-dev)"


def checks(bindir: str) -> list[tuple[str, ...]]:
    """The native front ends beside gpuhook in `bindir`, the warm helper, and the paths they make. Reads files;
    connects to the helper's socket."""
    native = native_front_ends(bindir)
    built = all(finding[0] == "ok" for finding in native)
    sock = os.environ.get("GPUHOOK_WARM_SOCKET") or _default_socket()
    warm = built and warm_answers(sock)
    if warm:
        paths = (f"paths: containers without a GPU request pass through natively; GPU containers and gpuhook's hooks "
                 f"are served by the warm helper at {sock}")
    elif built:
        paths = (f"paths: containers without a GPU request pass through natively; GPU containers and gpuhook's hooks "
                 f"start Python (the direct path): no warm helper answers at {sock}")
    else:
        paths = "paths: every container starts Python (no native front end); the warm helper cannot be reached"
    fix = "" if warm or not built else "start the warm helper: systemctl enable --now gpuhook-warm.service"
    return [*native, ("ok", paths, fix)]


def _default_socket() -> str:
    from gpuhook.cli.warm import SOCKET

    return SOCKET


def warm_answers(path: str) -> bool:
    """Whether a warm helper acknowledges a call at `path` within a second (its "A"; the junk call then gets
    "direct"). Connects to the socket."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(1.0)
            s.connect(path)
            s.send(b"doctor")
            return s.recv(64) == b"A"
    except OSError:
        return False


def native_front_ends(bindir: str) -> list[tuple[str, ...]]:
    """Whether the native front ends are installed beside gpuhook in `bindir` and built from this installation's
    sources (cli/launcher.py's digest), with what their absence costs. Reads files."""
    from gpuhook.cli.launcher import NATIVE_SOURCES, sources_digest

    fix = _REBUILD
    missing: list[tuple[str, ...]] = []
    for name, cost in _NATIVE_COST.items():
        try:
            with open(os.path.join(bindir, name), "rb") as f:
                native = f.read(4) == b"\x7fELF"
        except OSError:
            native = False
        if not native:
            missing.append(("warn", f"no native {name} in {bindir}: {cost}", fix))
    if missing:
        return missing
    try:
        with open(os.path.join(bindir, NATIVE_SOURCES)) as f:
            built_from = f.read(100).strip()
        current = sources_digest()
    except OSError as e:
        return [("warn", f"the native front ends in {bindir} have no record of their sources ({e.strerror})",
                        fix)]
    if built_from != current:
        return [("warn", f"the native front ends in {bindir} are stale: built from other sources than this "
                        "installation's (an upgrade that did not rebuild them); they may disagree with the Python "
                        "side about its cache files", fix)]
    return [("ok", f"native front ends in {bindir} (gpuhook-runtime, gpuhook-hook, gpuhook-createhook), "
                    "built from this installation's sources")]


