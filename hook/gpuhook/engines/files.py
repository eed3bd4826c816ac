"""The one writer of engine config files: backup before the first change, idempotent, revert, dry-run."""

from __future__ import annotations

import difflib
import os

from gpuhook.atomic import write_text
from gpuhook.engines.engine import restart
from gpuhook.engines.table import named
from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError
from gpuhook.frozen import frozen

SUFFIX = ".gpuhook-orig"  # the original bytes; SUFFIX + ".absent" when there was no file


@frozen
class Outcome:
    """What configure did (or would do), and what the user should do next."""

    path: str
    changed: bool
    diff: str
    next_step: str


def configure(engine: str, path: str, wanted: Wanted, dry_run: bool = False) -> Outcome:
    """Register gpuhook with engine `engine` in `path`. Writes the file (and its backup) unless dry_run."""
    old = _read(path)
    new = named(engine).render(old or "", wanted, path)
    diff = "".join(difflib.unified_diff((old or "").splitlines(True), new.splitlines(True), path, path))
    if new == old:
        return Outcome(path, False, "", f"{path} already registers gpuhook: nothing to do")
    if dry_run:
        return Outcome(path, False, diff, "dry run: nothing was written")
    _backup(path, old)
    _write(path, new)
    return Outcome(path, True, diff, _restart(engine, path, new))


def revert(engine: str, path: str, dry_run: bool = False) -> Outcome:
    """Put back the bytes `path` had before gpuhook first changed it (or remove it if it did not exist); the same for
    every engine. Writes (or removes) the file unless dry_run."""
    current = _read(path) or ""
    if os.path.exists(path + SUFFIX + ".absent"):
        diff = "".join(difflib.unified_diff(current.splitlines(True), [], path, "/dev/null"))
        if not dry_run:
            if os.path.exists(path):
                os.unlink(path)
            os.unlink(path + SUFFIX + ".absent")
        return Outcome(path, not dry_run, diff, _restart(engine, path, current, reverted=True) if not dry_run
                       else "dry run: nothing was written")
    if not os.path.exists(path + SUFFIX):
        return Outcome(path, False, "", f"gpuhook has no backup of {path}: nothing to revert")
    with open(path + SUFFIX) as f:
        original = f.read()
    diff = "".join(difflib.unified_diff(current.splitlines(True), original.splitlines(True), path, path))
    if not dry_run:
        _write(path, original)
        os.unlink(path + SUFFIX)
    return Outcome(path, not dry_run, diff, _restart(engine, path, current, reverted=True) if not dry_run
                   else "dry run: nothing was written")


def _restart(name: str, path: str, text: str, reverted: bool = False) -> str:
    """What to restart for engine `name` to see the change: the service that renders `path` where another does
    (k3s and RKE2 for their containerd templates), else the engine's daemon."""
    engine = named(name)
    hint = engine.rendered_by(path, text) if engine.rendered_by is not None else ""
    return hint or restart(engine, reverted, systemd=os.path.isdir("/run/systemd/system"))


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EngineConfigError(f"cannot read {path}: {e.strerror}") from e


def _backup(path: str, old: str | None) -> None:
    """Keep the original once: later runs must not overwrite it with gpuhook's own version."""
    if os.path.exists(path + SUFFIX) or os.path.exists(path + SUFFIX + ".absent"):
        return
    if old is None:
        _write(path + SUFFIX + ".absent", "")
    else:
        _write(path + SUFFIX, old)


def _write(path: str, text: str) -> None:
    try:
        write_text(path, text, make_dirs=True)
    except OSError as e:
        raise EngineConfigError(f"cannot write {path}: {e.strerror}") from e
