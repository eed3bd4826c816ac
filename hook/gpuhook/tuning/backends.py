"""The tuning backend of each vendor (the vendor module makes it), made on first use and closed at the end.
Imported only for tuning."""

from __future__ import annotations

from gpuhook.vendors.registry import tuning

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Backend


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
