"""What gpuhook registers with an engine: the one value every engine's editor takes."""

from __future__ import annotations

from gpuhook.frozen import frozen


@frozen
class Wanted:
    """What to register."""

    shim: str  # absolute path of gpuhook-runtime
    gpuhook: str  # absolute path of the hook: gpuhook-hook (its native front end) where built, else gpuhook
    config: str  # gpuhook's config path, for the hook's environment
    set_default: bool = False
    cdi: bool = False
