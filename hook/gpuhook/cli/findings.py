"""What a doctor check finds: the one value every check returns."""

from __future__ import annotations

from gpuhook.frozen import frozen


@frozen
class Finding:
    """One check's result: level ok, warn or fail."""

    level: str
    what: str
    fix: str = ""
