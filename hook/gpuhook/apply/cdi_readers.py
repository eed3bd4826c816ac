"""How an engine release parses CDI specs: the spec versions a container-device-interface library knows, and which
release of an engine vendors which library. Pure: the CLI runs `--version`; the engines' release tables are their
records' (engines/table.py), handed in.

An engine parses CDI specs with the container-device-interface library it vendors; that library knows the spec
versions up to its own (0.5.x: 0.1.0-0.5.0, 0.6.x: up to 0.6.0, ...) and refuses fields it does not know
(additionalGids before 0.7). A release table is the `container-device-interface` requirement of each release's
go.mod, from the first release that vendored the library, newest last. A release newer than a table's last row
reads what that row's does, or more.
"""

from __future__ import annotations

from gpuhook.frozen import frozen
from gpuhook.request.requirements import version_tuple

# the spec versions released, oldest first; a library parses those up to its own major.minor
SPEC_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
LATEST_LIBRARY = "1.1.0"  # the rules `cdi validate` checks when no engine is installed


@frozen
class Reader:
    """One installed CDI consumer: the engine's release and the library it parses specs with."""

    engine: str
    version: str  # the engine's release, e.g. 4.3.1
    library: str  # its container-device-interface version ("" when the release reads no CDI specs)
    product: str = ""  # how messages name the engine (Podman); "" for `engine` itself

    @property
    def label(self) -> str:
        """How messages name it: Podman 4.3.1."""
        return f"{self.product or self.engine} {self.version}".strip()

    @property
    def highest(self) -> str:
        """The highest cdiVersion it parses ("" for none)."""
        return highest_for(self.library) if self.library else ""


def highest_for(library: str) -> str:
    """The highest spec version a container-device-interface library version parses."""
    lib = version_tuple(library)[:2]
    known = [v for v in SPEC_VERSIONS if version_tuple(v)[:2] <= lib]
    return known[-1] if lib >= (0, 3) else "0.2.0"  # the pre-0.3 snapshot Podman 4.0 vendored knew 0.2.0


def library_in(releases: tuple[tuple[str, str], ...], version: str) -> str:
    """The container-device-interface version release `version` vendors, from a table of (first release, library)
    rows, oldest first; "" below the first row (that release reads no CDI specs)."""
    rows = [lib for first, lib in releases if version_tuple(first) <= version_tuple(version)]
    return rows[-1] if rows else ""


def version_in(output: str) -> str | None:
    """The release a `--version` output names: the first word shaped like 1.2 or 1.2.3 (a leading v, a
    distribution's ~ds1 or +dfsg1 suffix and a trailing comma dropped)."""
    for word in output.replace(",", " ").split():
        core = word.lstrip("v")
        for mark in "~+-":
            core = core.split(mark)[0]
        parts = core.split(".")
        if 2 <= len(parts) <= 4 and all(p.isdigit() for p in parts):
            return core
    return None


def common_highest(readers: tuple[Reader, ...]) -> tuple[str, Reader] | None:
    """The highest cdiVersion every reader parses, and the reader that limits it; None without readers."""
    reading = [r for r in readers if r.library]
    if not reading:
        return None
    limiting = min(reading, key=lambda r: version_tuple(r.highest))
    return limiting.highest, limiting
