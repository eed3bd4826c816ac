"""A container engine gpuhook registers with, as one record: its names, its program and config file, the editor that
registers gpuhook there, its daemon, whether it runs hooks.d entries, where its cgroup driver is set, and which of
its releases read CDI specs. engines/table.py holds the records; configure, doctor and the CDI commands read them and
never test an engine's name. Pure.

Reverting is the same for every engine (files.py puts the bytes back that the file had before gpuhook first changed
it), so a record has a `render` and no revert of its own.
"""

from __future__ import annotations

from gpuhook.apply.cdi_readers import Reader, library_in
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal

    from gpuhook.engines.wanted import Wanted


@frozen
class Daemon:
    """The service that reads the engine's config when it starts."""

    called: str  # how messages call what runs: dockerd, CRI-O
    unit: str  # its systemd unit: docker, crio


@frozen
class CgroupDriver:
    """Where the engine says which cgroup driver it uses, and how its text says it (marks are matched with blanks
    dropped and lower-cased; without a mark the engine's default holds)."""

    path: str
    systemd_mark: str  # text that names the systemd driver ("" for none)
    cgroupfs_mark: str  # text that names the cgroupfs driver ("" for none)
    default: Literal["systemd", "cgroupfs", "v2"]  # "v2": systemd on cgroup v2 hosts, else cgroupfs

    def systemd(self, text: str, cgroup_v2: bool) -> bool:
        """Whether a config file holding `text` (empty: no file) means the systemd cgroup driver. Pure."""
        flat = "".join(text.split()).lower()
        if self.systemd_mark and self.systemd_mark in flat:
            return True
        if self.cgroupfs_mark and self.cgroupfs_mark in flat:
            return False
        return self.default == "systemd" or (self.default == "v2" and cgroup_v2)


@frozen
class Cdi:
    """Which releases of the engine read CDI specs, and the switch in its config that turns them on."""

    releases: tuple[tuple[str, str], ...]  # (first release, the container-device-interface it vendors), oldest first
    setting: str = ""  # what configure writes for CDI ("" where the engine reads CDI specs unasked)
    automatic: bool = False  # written wherever the installed release reads CDI; else only on --cdi, refused where
    # the installed release reads none


@frozen
class DropIn:
    """Registration through a file of gpuhook's own that the engine's main config imports (containerd's conf.d), the
    default where it fits; the main config then changes by one import at most (engines/files.py writes both)."""

    default_path: Callable[[str], str]  # the main config's path -> where the drop-in goes unless told
    plan: Callable[[str | None, str, str, Wanted, str | None], tuple[str, str]]  # (main text or None, main path,
    # drop-in path, what to register, the drop-in as it is or None) -> (main config's new text, the drop-in's); pure
    undo: Callable[[str | None, str], str | None]  # (main text, the drop-in's) -> main without gpuhook's import;
    # None: remove the main config (gpuhook created it); pure
    fits: Callable[[str, str], bool]  # (main path, its text) -> whether a drop-in applies (not to a k3s template)
    imports: Callable[[str, str], list[str]]  # (main text, main path) -> the files it imports, as absolute globs,
    # for doctor; pure
    dump: tuple[str, ...] = ()  # the program's arguments, after `--config MAIN`, that print the merged config;
    # doctor looks for the gpuhook runtime there ("runtimes.gpuhook"); () where there is no such command


@frozen
class Engine:
    """One container engine, everything configure, doctor and the CDI commands know of it."""

    name: str  # configure's argument, doctor's word: crio
    label: str  # in messages: CRI-O
    program: str  # its executable: installed where it is on PATH; `PROGRAM --version` names the release
    config_path: str  # the file configure edits unless told another
    render: Callable[[str, Wanted, str], str]  # (the file's text, what to register, its path) -> the new text; pure
    daemon: Daemon | None  # what to restart for a changed config; None: nothing to restart (new containers see it)
    cgroup: CgroupDriver
    hooks_d: bool = False  # it runs OCI hooks.d entries (gpuhook's hook mode)
    cdi: Cdi | None = None  # None: no release reads CDI specs
    gpus_hook: bool = False  # its `--gpus` runs nvidia-container-runtime-hook from the daemon's PATH
    rendered_by: Callable[[str, str], str] | None = None  # (path, text) -> what to restart where another service
    # renders that file into the engine's config (k3s's and RKE2's containerd templates); "" where none does
    audit: Callable[[str, bytes], tuple[str, str] | None] | None = None  # doctor: (what, fix) where the file
    # registers gpuhook in a way the engine ignores
    drop_in: DropIn | None = None  # None: configure edits config_path itself (CRI-O's is a drop-in already)
    way: str = "the shim"  # doctor: the path its GPU containers take where gpuhook is registered, and how they ask

    def reader(self, version: str) -> Reader:
        """Release `version` as a CDI consumer (its library "" where that release, or every one, reads no CDI specs)."""
        releases = self.cdi.releases if self.cdi is not None else ()
        return Reader(engine=self.name, version=version, library=library_in(releases, version), product=self.label)


def restart(engine: Engine, reverted: bool = False, systemd: bool = True) -> str:
    """What to restart for `engine` to take the registration (or its removal); systemctl only where systemd runs."""
    if engine.daemon is None:
        return (f"no daemon to restart: new {engine.label} containers " + ("no longer run the gpuhook hook" if reverted
                else "with gpuhook.dev/ annotations use the hook"))
    called, unit = engine.daemon.called, engine.daemon.unit
    how = f"systemctl restart {unit}" if systemd else f"however {called} was started: there is no systemd here"
    what = "drop the gpuhook runtime (containers running on it keep it until they stop)" if reverted else \
        "see the gpuhook runtime"
    return f"restart {called} ({how}) for {engine.label} to {what}"


def cdi_since(engine: Engine) -> str:
    """The engine's first release that reads CDI specs, without trailing zeros (25, 1.7); "" where none does."""
    if engine.cdi is None or not engine.cdi.releases:
        return ""
    parts = engine.cdi.releases[0][0].split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)
