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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.engines.engine import DropIn

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


def configure_drop_in(engine: str, main: str, drop_in: str, wanted: Wanted, dry_run: bool = False) -> Outcome:
    """Register gpuhook with engine `engine` in its drop-in `drop_in`, and make its main config `main` import that
    (one line, where nothing there does). Writes both unless dry_run."""
    how = _drop_in_of(engine)
    old_main, old = _read(main), _read(drop_in)
    new_main, new = how.plan(old_main, main, drop_in, wanted, old)
    main_changed = new_main != old_main
    diff = _diff(main, old_main, new_main) + _diff(drop_in, old, new)
    if new == old and not main_changed:
        return Outcome(drop_in, False, "", f"{drop_in} already registers gpuhook and {main} imports it: nothing to do")
    if dry_run:
        return Outcome(drop_in, False, diff, "dry run: nothing was written")
    _write(drop_in, new)
    if main_changed:
        _write(main, new_main)
    note = (f"{'created' if old_main is None else 'added the imports line to'} {main} (its one change); "
            if main_changed else f"{main} imports it already (left as it was); ")
    return Outcome(drop_in, True, diff, note + _restart(engine, main, new_main))


def revert_drop_in(engine: str, main: str, drop_in: str, dry_run: bool = False) -> Outcome:
    """Remove gpuhook's drop-in `drop_in`, and the import configure added to `main` (only one it added). Removes or
    writes them unless dry_run."""
    how = _drop_in_of(engine)
    old = _read(drop_in)
    if old is None:
        if os.path.exists(main + SUFFIX) or os.path.exists(main + SUFFIX + ".absent"):
            return revert(engine, main, dry_run)  # an earlier gpuhook's registration, in place
        return Outcome(drop_in, False, "", f"there is no {drop_in}: nothing to revert")
    if "gpuhook configure" not in old:
        raise EngineConfigError(f"{drop_in} was not written by gpuhook configure: left alone; name gpuhook's drop-in "
                                "with --drop-in")
    old_main = _read(main)
    new_main = how.undo(old_main, old)
    diff = _diff(main, old_main, new_main) + _diff(drop_in, old, None)
    if dry_run:
        return Outcome(drop_in, False, diff, "dry run: nothing was written")
    _remove(drop_in)
    if new_main is None and old_main is not None:
        _remove(main)
    elif new_main is not None and new_main != old_main:
        _write(main, new_main)
    what = ("removed " + main + " (gpuhook created it); " if new_main is None and old_main is not None else
            "took gpuhook's imports line out of " + main + "; " if new_main != old_main else "")
    if os.path.exists(main + SUFFIX) or os.path.exists(main + SUFFIX + ".absent"):  # an earlier --in-place one too
        earlier = revert(engine, main)
        diff += earlier.diff
        what += f"put back {main} as it was before an earlier in-place registration; "
    return Outcome(drop_in, True, diff, what + _restart(engine, main, old_main or "", reverted=True))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError as e:
        raise EngineConfigError(f"cannot remove {path}: {e.strerror}") from e


def _drop_in_of(engine: str) -> DropIn:
    how = named(engine).drop_in
    if how is None:
        raise EngineConfigError(f"{engine} takes no drop-in from gpuhook: run gpuhook configure {engine} without "
                                "--drop-in")
    return how


def _diff(path: str, old: str | None, new: str | None) -> str:
    return "".join(difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True),
                                        path if old is not None else "/dev/null", path if new is not None else
                                        "/dev/null"))


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
