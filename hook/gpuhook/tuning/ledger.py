"""The tuning ledger in state_dir: originals, current values, holders, leases. The only writer of it.

Every change happens under an exclusive flock and is written atomically (temp, fsync, rename) before the
host is touched, once per call; a copy of the last good version is kept as ledger.json.prev. A ledger that
cannot be read is an error naming the file and the way to recover it: never a silent reset of somebody else's
holdings.
"""

from __future__ import annotations

import fcntl
import os

from gpuhook import fastjson
from gpuhook.apply.state_dir import ensure
from gpuhook.atomic import write_text
from gpuhook.errors import LedgerError
from gpuhook.statefile import read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    State = dict[str, Any]  # {"version": 1, "seq": int, "settings": {key: entry}, "leases": {gpu: holder}}

NAME = "ledger.json"
VERSION = 1
MAX_LEDGER = 16 << 20  # far above 64 GPUs x every setting x their holders: a larger file is not a ledger



def empty() -> State:
    """A ledger with no holdings."""
    return {"version": VERSION, "seq": 0, "settings": {}, "leases": {}}


class locked:  # lower case: used like the function it replaced, `with ledger.locked(d) as state`
    """The ledger, loaded under an exclusive lock held until the block ends. Creates state_dir if needed.
    A class, not @contextmanager: contextlib is a millisecond the shim's lease check need not pay."""

    def __init__(self, state_dir: str) -> None:
        self._dir = state_dir
        self._fd = -1

    def __enter__(self) -> State:
        ensure(self._dir)
        self._fd = os.open(os.path.join(self._dir, "ledger.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            return load(os.path.join(self._dir, NAME))
        except BaseException:
            os.close(self._fd)
            raise

    def __exit__(self, *_: object) -> None:
        os.close(self._fd)


def load(path: str) -> State:
    """Read a ledger file ({} state when absent); LedgerError when it is corrupt."""
    try:
        state = fastjson.loads(read_bounded(path, MAX_LEDGER))
    except FileNotFoundError:
        return empty()
    except (OSError, ValueError) as e:
        raise _corrupt(path, str(e)) from e
    if not (isinstance(state, dict) and state.get("version") == VERSION and isinstance(state.get("settings"), dict)
            and isinstance(state.get("leases"), dict)):
        raise _corrupt(path, "unexpected structure")
    return state


def save(state_dir: str, state: State) -> None:
    """Write the ledger atomically, and a copy as .prev: the last good version for the documented recovery when
    ledger.json is damaged from outside (an edit, a truncation), with every holding of the last write (a container's
    call writes the ledger once: a copy of the version before it would lose the settings it applied). Call while
    holding the lock. Writes two files."""
    path = os.path.join(state_dir, NAME)
    text = render(state)
    write_text(path, text, mode=0o644)  # atomic: ledger.json never disappears (readers outside the lock rely on it)
    dir_fd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    write_text(path + ".prev", text, mode=0o644, durable=False)  # a copy, never a link: a truncation of one is not
    # the other's


def render(state: State) -> str:
    """The ledger as JSON an admin can read: one line per key, and per setting or lease. (json's indent
    would cost both tuning hooks of every tuned container the json package: ~9 ms each.)"""
    lines = []
    for key, value in sorted(state.items()):
        if isinstance(value, dict) and value:
            inner = ",\n".join(f"  {fastjson.dumps(k)}: {fastjson.dumps(v)}" for k, v in sorted(value.items()))
            lines.append(f" {fastjson.dumps(key)}: {{\n{inner}\n }}")
        else:
            lines.append(f" {fastjson.dumps(key)}: {fastjson.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _corrupt(path: str, why: str) -> LedgerError:
    return LedgerError(f"the tuning ledger {path} is corrupt ({why}); gpuhook applies and restores no GPU tuning "
                       f"until it is repaired: inspect it, or restore the last good copy with "
                       f"`cp {path}.prev {path}` and run `gpuhook gc` (see docs/tuning.md)")
