"""`gpuhook configure ENGINE`: register gpuhook with Docker, containerd, CRI-O or Podman.

Each engine module turns a config file's text into the text with gpuhook registered (pure); files.py is the
only writer: a backup before the first change, idempotent writes, --revert to the original bytes, --dry-run.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.engines.wanted import Wanted

ENGINES = ("docker", "containerd", "crio", "podman")
DEFAULT_PATHS = {
    "docker": "/etc/docker/daemon.json",
    "containerd": "/etc/containerd/config.toml",
    "crio": "/etc/crio/crio.conf.d/99-gpuhook.toml",
    "podman": "/usr/share/containers/oci/hooks.d/gpuhook.json",
}
_DAEMONS = {"docker": ("dockerd", "docker", "Docker"), "containerd": ("containerd", "containerd", "containerd"),
            "crio": ("CRI-O", "crio", "CRI-O")}  # engine -> (what runs, its systemd unit, who sees the change)


def restart(engine: str, reverted: bool = False, systemd: bool = True) -> str:
    """What to restart for `engine` to take the registration (or its removal); systemctl only where systemd runs."""
    if engine == "podman":
        return ("no daemon to restart: new Podman containers " + ("no longer run the gpuhook hook" if reverted
                else "with gpuhook.dev/ annotations use the hook"))
    daemon, unit, who = _DAEMONS[engine]
    how = f"systemctl restart {unit}" if systemd else f"however {daemon} was started: there is no systemd here"
    what = "drop the gpuhook runtime (containers running on it keep it until they stop)" if reverted else \
        "see the gpuhook runtime"
    return f"restart {daemon} ({how}) for {who} to {what}"


def render(engine: str, old: str, wanted: Wanted, path: str = "") -> str:
    """The config text with gpuhook registered (`path` tells a template from the file itself). Pure;
    EngineConfigError when `old` cannot be read."""
    if engine == "docker":
        from gpuhook.engines import docker

        return docker.edit(old, wanted)
    if engine == "containerd":
        from gpuhook.engines import containerd, containerd_template

        if containerd_template.is_template(path, old):  # k3s, RKE2: a Go template of the config
            return containerd_template.edit(old, wanted, path)
        return containerd.edit(old, wanted)
    if engine == "crio":
        from gpuhook.engines import crio

        return crio.render(wanted)
    from gpuhook.engines import podman

    return podman.render(wanted)
