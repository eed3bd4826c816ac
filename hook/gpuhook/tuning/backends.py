"""The tuning backend of each vendor (the vendor module makes it), made on first use and closed at the end; and the
one check of asked settings against the GPUs' own ranges, which the shim and the DRA driver make before anything
changes (the backends' `set` makes it again, last). Imported only for tuning."""

from __future__ import annotations

from gpuhook.vendors.registry import tuning

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Backend, Setting


class BackendSet:
    """Callable vendor -> Backend, for tuning.session's acquire/release/sweep; use as a context manager."""

    def __init__(self, root: Root, state_dir: str) -> None:
        self._root = root
        self._state_dir = state_dir
        self._made: dict[str, Backend] = {}

    def __call__(self, vendor: str) -> Backend:
        if vendor not in self._made:
            self._made[vendor] = tuning(vendor).backend(self._root, self._state_dir)
        return self._made[vendor]

    def __enter__(self) -> BackendSet:
        return self

    def __exit__(self, *_: object) -> None:
        for b in self._made.values():
            b.close()


def check_ranges(root: Root, state_dir: str, settings: Sequence[Setting]) -> None:
    """Each of `settings` (values asked) against its GPU's own range, through its vendor's backend, in order:
    TuningError naming the range (or what the GPU lacks) at the first the GPU cannot take. Nothing asked: nothing
    loaded. Loads the vendors' libraries (NVML, amd-smi) and reads the GPUs; writes nothing."""
    if not settings:
        return
    with BackendSet(root, state_dir) as backends:
        for s in settings:
            backends(s.vendor).check(s)
