"""k3s's and RKE2's containerd config templates: `gpuhook configure containerd --config-path` on
/var/lib/rancher/{k3s,rke2}/agent/etc/containerd/config.toml.tmpl (or config-v3.toml.tmpl, where their containerd
is 2.x). Pure.

The distribution renders the template (a Go text/template) into config.toml at every start and overwrites the
config.toml itself, so the template is the file to edit; it is not TOML until rendered. gpuhook keeps its part
in one marked block at the end: the gpuhook runtime's tables only (a table the base config already defines, such
as the CRI plugin's, cannot be repeated). A new template is `{{ template "base" . }}` (the distribution's own
config; k3s and RKE2 releases from September 2023 have it) and the block; rerunning replaces the block, --revert
puts the original bytes back.
"""

from __future__ import annotations

import os

from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError

BEGIN = "# BEGIN gpuhook: its runtime (gpuhook configure containerd rewrites this block, --revert removes it)"
END = "# END gpuhook"
BASE = '{{ template "base" . }}'


def is_template(path: str, text: str) -> bool:
    """Whether a containerd config is a Go template of one (a .tmpl file, or text with {{ }} actions)."""
    return path.endswith(".tmpl") or "{{" in text


def edit(old: str, wanted: Wanted, path: str) -> str:
    """The template with gpuhook's block (replacing an earlier one); EngineConfigError for what a template cannot
    take: a default runtime (the distribution sets it), or a gpuhook runtime defined outside the block."""
    import tomlkit

    from gpuhook.engines.containerd import CRI, add_runtime

    if wanted.set_default:
        raise EngineConfigError("k3s and RKE2 choose containerd's default runtime themselves: set `default-runtime: "
                                "gpuhook` in /etc/rancher/k3s/config.yaml (RKE2: /etc/rancher/rke2/config.yaml), or "
                                "use a RuntimeClass with handler gpuhook; run again without --set-default")
    rest = without_block(old)
    if not rest.strip():
        rest = BASE + "\n"
    version = _version(path, rest)
    if f"{CRI[version]}\".containerd.runtimes.gpuhook]" in rest or ".runtimes.gpuhook]" in rest:
        raise EngineConfigError(f"{path} defines a gpuhook runtime outside gpuhook's block: remove it and run again")
    doc = tomlkit.document()
    add_runtime(doc, version, wanted)
    return f"{rest.rstrip()}\n\n{BEGIN}\n{tomlkit.dumps(doc).strip()}\n{END}\n"


def without_block(text: str) -> str:
    """The template without gpuhook's block."""
    lines = text.splitlines(keepends=True)
    if BEGIN not in (line.rstrip("\n") for line in lines):
        return text
    start = [line.rstrip("\n") for line in lines].index(BEGIN)
    end = next((i for i in range(start, len(lines)) if lines[i].rstrip("\n") == END), len(lines) - 1)
    return "".join(lines[:start] + lines[end + 1:]).rstrip() + ("\n" if start else "")


def _version(path: str, text: str) -> int:
    """The config version the rendered file has: 3 for config-v3.toml.tmpl (containerd 2.x) or a `version = 3`
    line of the template's own, else 2 (what k3s's and RKE2's base config of containerd 1.x is)."""
    if os.path.basename(path).startswith("config-v3"):
        return 3
    own = [line.split("=", 1)[1].strip() for line in text.splitlines()
           if line.split("=", 1)[0].strip() == "version" and "=" in line]
    return 3 if own[:1] == ["3"] else 2


def restart_hint(path: str) -> str:
    """What to restart so that the distribution renders the template again."""
    if "/rancher/rke2/" in path:
        return "restart RKE2 (systemctl restart rke2-server, or rke2-agent on agents) to render containerd's config"
    if "/rancher/k3s/" in path:
        return "restart k3s (systemctl restart k3s, or k3s-agent on agents) to render containerd's config"
    return "restart the service that renders this template into containerd's config"


def rendered_by(path: str, text: str) -> str:
    """What to restart where `path` (holding `text`) is a template a distribution renders into containerd's config;
    "" where it is containerd's own file."""
    return restart_hint(path) if is_template(path, text) else ""
