"""`gpuhook configure ENGINE`: register gpuhook with Docker, containerd, CRI-O or Podman.

Each engine module turns a config file's text into the text with gpuhook registered (pure); files.py is the
only writer: a backup before the first change, idempotent writes, --revert to the original bytes, --dry-run.
"""

from __future__ import annotations

from gpuhook.frozen import frozen

ENGINES = ("docker", "containerd", "crio", "podman")
DEFAULT_PATHS = {
    "docker": "/etc/docker/daemon.json",
    "containerd": "/etc/containerd/config.toml",
    "crio": "/etc/crio/crio.conf.d/99-gpuhook.toml",
    "podman": "/usr/share/containers/oci/hooks.d/gpuhook.json",
}
RESTART = {
    "docker": "restart dockerd (systemctl restart docker) for Docker to see the gpuhook runtime",
    "containerd": "restart containerd (systemctl restart containerd) for it to see the gpuhook runtime",
    "crio": "restart CRI-O (systemctl restart crio) for it to see the gpuhook runtime",
    "podman": "no daemon to restart: new Podman containers with gpuhook.dev/ annotations use the hook",
}


@frozen
class Wanted:
    """What to register."""

    shim: str  # absolute path of gpuhook-runtime
    gpuhook: str  # absolute path of the hook: gpuhook-hook (its native front end) where built, else gpuhook
    config: str  # gpuhook's config path, for the hook's environment
    set_default: bool = False
    cdi: bool = False


def render(engine: str, old: str, wanted: Wanted, path: str = "") -> str:
    """The config text with gpuhook registered (`path` tells a template from the file itself). Pure;
    EngineConfigError when `old` cannot be read."""
    if engine == "docker":
        from gpuhook.engines import docker

        return docker.edit(old, wanted)
    if engine == "containerd":
        from gpuhook.engines import containerd

        return containerd.edit(old, wanted, path)
    if engine == "crio":
        from gpuhook.engines import crio

        return crio.render(wanted)
    from gpuhook.engines import podman

    return podman.render(wanted)
