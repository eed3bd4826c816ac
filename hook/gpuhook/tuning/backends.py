"""The tuning backend of each vendor (the vendor module makes it), made on first use and closed at the end; and the
one check of asked settings against the GPUs' own ranges, which the shim and the DRA driver make before anything
changes and the prestart hook makes last, right before it writes. Imported only for tuning.

A GPU's ranges (its supported clocks, power-limit constraints, fan speeds) are its board's and its driver's: they do
not change while the same driver is loaded. So a value a GPU accepted under a driver version is remembered, by
(vendor, GPU, driver version, setting, value), in this process (a warm worker keeps it across calls) and in
state_dir/ranges.json (the shim's check and the prestart hook's are separate processes on the direct path): a
value seen before opens no backend session (NVML, amd-smi) to be checked again. Refusals are never remembered, nor
anything whose driver version is unknown, nor MPS (its check is a host program's presence, not a range)."""

from __future__ import annotations

import os

from gpuhook import fastjson
from gpuhook.vendors.registry import tuning

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Backend, Setting

MEMO = "ranges.json"  # in state_dir: the values accepted, one key each (a JSON list of strings)
MAX_MEMO = 1 << 20  # a larger file is not gpuhook's: it is ignored
KEEP = 1024  # the newest keys kept: far above every value asked of every GPU between two driver upgrades
_UNRANGED = frozenset({"mps"})  # checks that are not a GPU's range
_ACCEPTED: set[str] = set()  # this process's memo (a long-lived warm worker's across calls)


class BackendSet:
    """Callable vendor -> Backend, for tuning.session's acquire/release/sweep; use as a context manager. `drivers`
    (vendor -> driver version, as discovery read it): the key of the range memo; without it every check is made."""

    def __init__(self, root: Root, state_dir: str, drivers: Mapping[str, str] | None = None) -> None:
        self._root = root
        self._state_dir = state_dir
        self._drivers = drivers or {}
        self._made: dict[str, Backend] = {}
        self._file: dict[str, None] | None = None  # ranges.json's keys in order, read on the first check needing them
        self._new: list[str] = []

    def __call__(self, vendor: str) -> Backend:
        if vendor not in self._made:
            self._made[vendor] = tuning(vendor).backend(self._root, self._state_dir)
        return self._made[vendor]

    def __enter__(self) -> BackendSet:
        return self

    def __exit__(self, *_: object) -> None:
        try:
            if self._new:
                _remember(self._state_dir, self._file or {}, self._new)
        finally:
            for b in self._made.values():
                b.close()

    def check(self, s: Setting) -> None:
        """TuningError where the GPU cannot take `s.value` (its backend's check), unless it took the same value under
        the same driver before (this process or ranges.json). Reads the GPU through its backend (opening the
        vendor's session) only for a value not seen before."""
        key = self._key(s)
        if key is not None and key in _ACCEPTED:
            return
        if key is not None:
            if self._file is None:
                self._file = _read(self._state_dir)
            if key in self._file:
                _accept(key)
                return
        self(s.vendor).check(s)
        if key is not None:
            _accept(key)
            self._new.append(key)

    def _key(self, s: Setting) -> str | None:
        driver = self._drivers.get(s.vendor, "")
        if not driver or s.name in _UNRANGED:
            return None
        return "\t".join((s.vendor, s.gpu, driver, s.name, s.value))


def check_ranges(root: Root, state_dir: str, settings: Sequence[Setting],
                 drivers: Mapping[str, str] | None = None) -> None:
    """Each of `settings` (values asked) against its GPU's own range, through its vendor's backend, in order:
    TuningError naming the range (or what the GPU lacks) at the first the GPU cannot take. Nothing asked, or every
    value accepted before under the same driver (`drivers`: vendor -> version; BackendSet.check): nothing loaded.
    Loads the vendors' libraries (NVML, amd-smi) and reads the GPUs; writes state_dir/ranges.json."""
    if not settings:
        return
    with BackendSet(root, state_dir, drivers) as backends:
        for s in settings:
            backends.check(s)


def _accept(key: str) -> None:
    """`key` into this process's memo, bounded (KEEP) however many values a long-lived worker is asked."""
    if len(_ACCEPTED) >= KEEP:
        _ACCEPTED.clear()
    _ACCEPTED.add(key)


def _read(state_dir: str) -> dict[str, None]:
    """ranges.json's keys, in order; none where it is absent, not a regular file of at most MAX_MEMO bytes, or not
    a list of strings (it is only a memo), or where state_dir is not root's alone. Reads a file."""
    from gpuhook.apply.state_dir import ensure
    from gpuhook.errors import GpuhookError
    from gpuhook.statefile import read_bounded

    try:
        keys = fastjson.loads(read_bounded(os.path.join(ensure(state_dir), MEMO), MAX_MEMO))
    except (OSError, ValueError, RecursionError, GpuhookError):
        return {}
    return dict.fromkeys(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else {}


def _remember(state_dir: str, known: dict[str, None], new: list[str]) -> None:
    """ranges.json with `new` keys added to those read (at most KEEP, the newest last). Best effort: a memo that
    cannot be written is checked again next time. Writes a file."""
    from gpuhook.apply.state_dir import ensure
    from gpuhook.atomic import write_text
    from gpuhook.errors import GpuhookError

    keys = [k for k in known if k not in new] + new
    try:
        write_text(os.path.join(ensure(state_dir), MEMO), fastjson.dumps(keys[-KEEP:]) + "\n", mode=0o600,
                   durable=False)
    except (OSError, GpuhookError):
        return  # (not contextlib.suppress: a module the hooks need not load) checked again next time
