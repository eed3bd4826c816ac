"""The tuning backend of each vendor (the vendor module makes it), made on first use and closed at the end.
Imported only for tuning."""

from __future__ import annotations

from gpuhook.vendors.registry import get

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from gpuhook.host.root import Root
    from gpuhook.plan.tuning import Setting
else:
    Protocol = object


class Backend(Protocol):
    """Reads and writes one vendor's GPU settings (values as text; the original is restored with set)."""

    def get(self, s: Setting) -> str:
        """The setting's current value."""
        ...

    def set(self, s: Setting, value: str) -> None:
        """Change the setting. Writes to the host."""
        ...

    def close(self) -> None:
        """End the backend's session."""
        ...


class BackendSet:
    """Callable vendor -> Backend, for tuning.session's acquire/release/sweep; use as a context manager."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._made: dict[str, Backend] = {}

    def __call__(self, vendor: str) -> Backend:
        if vendor not in self._made:
            self._made[vendor] = get(vendor).backend(self._root)
        return self._made[vendor]

    def __enter__(self) -> BackendSet:
        return self

    def __exit__(self, *_: object) -> None:
        for b in self._made.values():
            b.close()
