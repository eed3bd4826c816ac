"""Which engines read CDI specs, and which cdiVersions each release parses. Pure: the CLI runs `--version`.

An engine parses CDI specs with the container-device-interface library it vendors; that library knows the spec
versions up to its own (0.5.x: 0.1.0-0.5.0, 0.6.x: up to 0.6.0, ...) and refuses fields it does not know
(additionalGids before 0.7). The tables are the `container-device-interface` requirement of each release's
go.mod (Podman, containerd, moby, CRI-O), from the first release that vendored the library, newest last.
A release newer than a table's last row reads what that row's does, or more.
"""

from __future__ import annotations

from gpuhook.frozen import frozen
from gpuhook.request.requirements import version_tuple

# engine -> its `--version` command, a label, and (first release, CDI library version) rows
ENGINES: dict[str, tuple[tuple[str, ...], str, tuple[tuple[str, str], ...]]] = {
    "podman": (("podman", "--version"), "Podman", (
        ("4.0.0", "0.2.0"), ("4.1.0", "0.4.0"), ("4.3.0", "0.5.2"), ("4.4.0", "0.5.3"), ("4.5.0", "0.5.4"),
        ("4.7.0", "0.6.1"), ("4.8.0", "0.6.2"), ("5.1.0", "0.7.2"), ("5.2.0", "0.8.0"), ("5.5.0", "1.0.1"))),
    "containerd": (("containerd", "--version"), "containerd", (
        ("1.7.0", "0.5.4"), ("1.7.12", "0.6.1"), ("1.7.13", "0.6.2"), ("1.7.16", "0.7.2"), ("1.7.27", "0.8.1"),
        ("2.0.0", "0.8.0"), ("2.0.3", "0.8.1"), ("2.0.5", "1.0.0"), ("2.1.0", "1.0.1"), ("2.2.1", "1.1.0"))),
    "docker": (("dockerd", "--version"), "Docker", (  # CDI needs "features": {"cdi": true} before 28.2
        ("25.0.0", "0.6.2"), ("25.0.17", "0.8.1"), ("26.0.0", "0.6.2"), ("26.1.0", "0.7.1"), ("26.1.1", "0.7.2"),
        ("27.4.0", "0.8.0"), ("28.0.1", "0.8.1"), ("28.1.0", "1.0.1"))),
    "crio": (("crio", "--version"), "CRI-O", (
        ("1.24.0", "0.3.2"), ("1.25.0", "0.5.0"), ("1.25.2", "0.5.2"), ("1.25.5", "0.5.4"), ("1.26.0", "0.5.3"),
        ("1.27.0", "0.5.4"), ("1.28.0", "0.6.0"), ("1.29.0", "0.6.2"), ("1.30.0", "0.7.2"), ("1.31.0", "0.8.0"),
        ("1.32.2", "0.8.1"), ("1.33.0", "1.0.1"), ("1.35.0", "1.1.0"))),
}
# the spec versions released, oldest first; a library parses those up to its own major.minor
SPEC_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
LATEST_LIBRARY = "1.1.0"  # the rules `cdi validate` checks when no engine is installed


@frozen
class Reader:
    """One installed CDI consumer: the engine's release and the library it parses specs with."""

    engine: str
    version: str  # the engine's release, e.g. 4.3.1
    library: str  # its container-device-interface version ("" when the release reads no CDI specs)

    @property
    def label(self) -> str:
        """How messages name it: Podman 4.3.1."""
        return f"{ENGINES[self.engine][1] if self.engine in ENGINES else self.engine} {self.version}".strip()

    @property
    def highest(self) -> str:
        """The highest cdiVersion it parses ("" for none)."""
        return highest_for(self.library) if self.library else ""


def highest_for(library: str) -> str:
    """The highest spec version a container-device-interface library version parses."""
    lib = version_tuple(library)[:2]
    known = [v for v in SPEC_VERSIONS if version_tuple(v)[:2] <= lib]
    return known[-1] if lib >= (0, 3) else "0.2.0"  # the pre-0.3 snapshot Podman 4.0 vendored knew 0.2.0


def reader(engine: str, version: str) -> Reader:
    """The reader an engine release is (library "" below the first release with CDI); ValueError for an engine
    gpuhook has no table for."""
    if engine not in ENGINES:
        raise ValueError(f"unknown CDI consumer {engine!r}: known are {', '.join(ENGINES)}")
    rows = [lib for first, lib in ENGINES[engine][2] if version_tuple(first) <= version_tuple(version)]
    return Reader(engine, version, rows[-1] if rows else "")


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
