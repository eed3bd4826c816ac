"""The container engines gpuhook registers with: one record each (engines/engine.py), and the lookups over them.

An engine is its editor module (docker.py, containerd.py with containerd_template.py, crio.py, podman.py) and its
record here, in BUILTIN; `gpuhook configure`'s choices, doctor's checks, the CDI commands' consumers and the install
scripts (through `gpuhook configure`) come from the records, and nothing outside this module names an engine to
pick a behaviour. `register` adds one from outside (a plugin, a test) for the life of the process. The editors are
imported when a record's functions are first called, so reading the table costs no TOML or JSON module.

The CDI release tables are the `container-device-interface` requirement of each release's go.mod (moby, containerd,
CRI-O, Podman), from the first release that vendored the library (apply/cdi_readers.py reads them).
"""

from __future__ import annotations

from gpuhook.engines.engine import Cdi, CgroupDriver, Daemon, DropIn, Engine, cdi_since
from gpuhook.errors import EngineConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.apply.cdi_readers import Reader
    from gpuhook.engines.wanted import Wanted


def _docker(old: str, wanted: Wanted, path: str) -> str:
    from gpuhook.engines import docker

    return docker.edit(old, wanted)


def _containerd(old: str, wanted: Wanted, path: str) -> str:
    from gpuhook.engines import containerd, containerd_template

    if containerd_template.is_template(path, old):  # k3s, RKE2: a Go template of the config
        return containerd_template.edit(old, wanted, path)
    return containerd.edit(old, wanted)


def _containerd_rendered_by(path: str, text: str) -> str:
    from gpuhook.engines.containerd_template import rendered_by

    return rendered_by(path, text)


def _containerd_drop_in_path(main: str) -> str:
    from gpuhook.engines.containerd_dropin import default_path

    return default_path(main)


def _containerd_plan(main_text: str | None, main: str, drop_in: str, wanted: Wanted,
                     old: str | None) -> tuple[str, str]:
    from gpuhook.engines.containerd_dropin import plan

    return plan(main_text, main, drop_in, wanted, old)


def _containerd_undo(main_text: str | None, drop_in_text: str) -> str | None:
    from gpuhook.engines.containerd_dropin import undo

    return undo(main_text, drop_in_text)


def _containerd_fits(path: str, text: str) -> bool:
    from gpuhook.engines.containerd_template import is_template

    return not is_template(path, text)  # k3s, RKE2: their template, edited in place


def _containerd_imports(text: str, path: str) -> list[str]:
    from gpuhook.engines.containerd_dropin import imports_of

    return imports_of(text, path)


def _crio(old: str, wanted: Wanted, path: str) -> str:
    from gpuhook.engines import crio

    return crio.render(wanted)


def _crio_ignored(path: str, text: bytes) -> tuple[str, str] | None:
    from gpuhook.engines.crio import ignored

    return ignored(path, text)


def _podman(old: str, wanted: Wanted, path: str) -> str:
    from gpuhook.engines import podman

    return podman.render(wanted)


DOCKER = Engine(
    name="docker", label="Docker", program="dockerd", config_path="/etc/docker/daemon.json", render=_docker,
    daemon=Daemon(called="dockerd", unit="docker"), gpus_hook=True, way="the shim (docker run --runtime gpuhook)",
    cgroup=CgroupDriver(path="/etc/docker/daemon.json", systemd_mark="native.cgroupdriver=systemd",
                        cgroupfs_mark="native.cgroupdriver=cgroupfs", default="v2"),
    cdi=Cdi(setting="features.cdi", releases=(  # Docker 28.2 reads CDI specs without features.cdi
        ("25.0.0", "0.6.2"), ("25.0.17", "0.8.1"), ("26.0.0", "0.6.2"), ("26.1.0", "0.7.1"), ("26.1.1", "0.7.2"),
        ("27.4.0", "0.8.0"), ("28.0.1", "0.8.1"), ("28.1.0", "1.0.1"),
        # Docker 29 is github.com/moby/moby/v2 v2.0.0-beta.N, each the release its releases/versions.yaml names next:
        # beta.15 (29.5.2) vendors 1.1.0, beta.24 (29.8.1) 1.1.1 (beta.1, the first, 1.0.1)
        ("29.5.2", "1.1.0"), ("29.8.1", "1.1.1"))))
CONTAINERD = Engine(
    name="containerd", label="containerd", program="containerd", config_path="/etc/containerd/config.toml",
    render=_containerd, rendered_by=_containerd_rendered_by, daemon=Daemon(called="containerd", unit="containerd"),
    drop_in=DropIn(default_path=_containerd_drop_in_path, plan=_containerd_plan, undo=_containerd_undo,
                   fits=_containerd_fits, imports=_containerd_imports, dump=("config", "dump")),
    way="the shim (a RuntimeClass with handler gpuhook; ctr run --runc-binary gpuhook-runtime)",
    cgroup=CgroupDriver(path="/etc/containerd/config.toml", systemd_mark="systemdcgroup=true", cgroupfs_mark="",
                        default="cgroupfs"),
    cdi=Cdi(setting="enable_cdi", automatic=True, releases=(  # containerd 2 (config version 3) has CDI on already
        ("1.7.0", "0.5.4"), ("1.7.12", "0.6.1"), ("1.7.13", "0.6.2"), ("1.7.16", "0.7.2"), ("1.7.27", "0.8.1"),
        ("2.0.0", "0.8.0"), ("2.0.3", "0.8.1"), ("2.0.5", "1.0.0"), ("2.1.0", "1.0.1"), ("2.2.1", "1.1.0"))))
CRIO = Engine(
    name="crio", label="CRI-O", program="crio", config_path="/etc/crio/crio.conf.d/99-gpuhook.toml", render=_crio,
    audit=_crio_ignored, daemon=Daemon(called="CRI-O", unit="crio"), hooks_d=True,
    way="the shim (a RuntimeClass with handler gpuhook)",
    cgroup=CgroupDriver(path="/etc/crio/crio.conf", systemd_mark="", cgroupfs_mark='cgroup_manager="cgroupfs"',
                        default="systemd"),
    cdi=Cdi(releases=(  # CDI on by default (cdi_spec_dirs /etc/cdi, /var/run/cdi)
        ("1.24.0", "0.3.2"), ("1.25.0", "0.5.0"), ("1.25.2", "0.5.2"), ("1.25.5", "0.5.4"), ("1.26.0", "0.5.3"),
        ("1.27.0", "0.5.4"), ("1.28.0", "0.6.0"), ("1.29.0", "0.6.2"), ("1.30.0", "0.7.2"), ("1.31.0", "0.8.0"),
        ("1.32.2", "0.8.1"), ("1.33.0", "1.0.1"), ("1.35.0", "1.1.0"))))
PODMAN = Engine(
    name="podman", label="Podman", program="podman", config_path="/usr/share/containers/oci/hooks.d/gpuhook.json",
    render=_podman, daemon=None, hooks_d=True, way="the hook (hooks.d, for containers with gpuhook.dev/ annotations)",
    cgroup=CgroupDriver(path="/etc/containers/containers.conf", systemd_mark="",
                        cgroupfs_mark='cgroup_manager="cgroupfs"', default="systemd"),
    cdi=Cdi(releases=(
        ("4.0.0", "0.2.0"), ("4.1.0", "0.4.0"), ("4.3.0", "0.5.2"), ("4.4.0", "0.5.3"), ("4.5.0", "0.5.4"),
        ("4.7.0", "0.6.1"), ("4.8.0", "0.6.2"), ("5.1.0", "0.7.2"), ("5.2.0", "0.8.0"), ("5.5.0", "1.0.1"))))

BUILTIN: tuple[Engine, ...] = (DOCKER, CONTAINERD, CRIO, PODMAN)  # the order of choices, checks and listings
_registered: list[Engine] = []


def all_engines() -> tuple[Engine, ...]:
    """Every engine gpuhook knows: the built-in ones, then those registered, in a stable order."""
    return (*BUILTIN, *_registered)


def names() -> tuple[str, ...]:
    """The engines' names, as `gpuhook configure` takes them."""
    return tuple(e.name for e in all_engines())


def named(name: str) -> Engine:
    """The engine called `name`; EngineConfigError naming the known ones for any other."""
    for engine in all_engines():
        if engine.name == name:
            return engine
    raise EngineConfigError(f"unknown engine {name!r}: gpuhook knows {', '.join(names())}")


def register(engine: Engine) -> None:
    """Add `engine` for the life of the process (a plugin, a test); EngineConfigError where its name is taken."""
    if engine.name in names():
        raise EngineConfigError(f"an engine called {engine.name!r} is known already")
    _registered.append(engine)


def cdi_consumers() -> tuple[Engine, ...]:
    """The engines some of whose releases read CDI specs."""
    return tuple(e for e in all_engines() if e.cdi is not None and e.cdi.releases)


def cdi_switches() -> str:
    """What `configure --cdi` writes for each engine that has a CDI switch, for its help."""
    return "; ".join(f"{e.name}: {e.cdi.setting}" + (f", the default where {e.label} is {cdi_since(e)} or later"
                                                     if e.cdi.automatic else "")
                     for e in all_engines() if e.cdi is not None and e.cdi.setting)


def reader(name: str, version: str) -> Reader:
    """The CDI reader release `version` of engine `name` is (library "" below its first release with CDI);
    ValueError for an engine with no CDI release table."""
    for engine in cdi_consumers():
        if engine.name == name:
            return engine.reader(version)
    raise ValueError(f"unknown CDI consumer {name!r}: known are {', '.join(e.name for e in cdi_consumers())}")
