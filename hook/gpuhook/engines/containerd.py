"""containerd's config.toml (version 2 or 3): a gpuhook runtime (runc v2 shim, BinaryName = gpuhook-runtime),
edited with tomlkit so that comments and unrelated settings stay.

Which annotations reach the runtime is the kubelet's authority made concrete: `container_annotations` passes
the allocation key, which only the device plugin's Allocate answer carries (the kubelet puts it on the
container); `pod_annotations` passes every other gpuhook.dev/ key by name (a pod author's GPU request reaches
gpuhook and is refused with how to ask, tuning requests reach it too) but never the allocation key, so no pod
annotation can pose as an allocation. CDI is turned on where containerd has it (1.7 and later: its record's CDI
releases, engines/table.py). k3s's and RKE2's Go templates of the file (config.toml.tmpl, config-v3.toml.tmpl) are
containerd_template.py's.
"""

from __future__ import annotations

from typing import Any

from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError
from gpuhook.request.container import ALLOCATION, PREFIX, pod_keys

CRI = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


def edit(old: str, wanted: Wanted) -> str:
    """config.toml text with the gpuhook runtime (and default_runtime_name when asked); a Go template of it (k3s,
    RKE2) is containerd_template's."""
    import tomlkit

    try:
        doc = tomlkit.parse(old)
    except Exception as e:  # tomlkit raises several parse error types
        raise EngineConfigError(f"containerd's config is not valid TOML ({e})") from e
    version = int(doc.get("version", 1)) if old.strip() else 2
    if version not in CRI:
        raise EngineConfigError(f"containerd config version {version} is not supported: use version 2 or 3 "
                                "(`containerd config migrate` converts older files)")
    if not old.strip():
        doc["version"] = version
    containerd = add_runtime(doc, version, wanted)
    if wanted.set_default:
        containerd["default_runtime_name"] = "gpuhook"
    if wanted.cdi and version == 2:  # containerd 2 (config version 3) has CDI on by default
        cri = doc["plugins"][CRI[version]]
        cri["enable_cdi"] = True
        if "cdi_spec_dirs" not in cri:
            cri["cdi_spec_dirs"] = ["/etc/cdi", "/var/run/cdi"]
    return tomlkit.dumps(doc)


def add_runtime(doc: Any, version: int, wanted: Wanted) -> Any:
    """Put the gpuhook runtime table into a tomlkit document of config `version`; return its containerd table."""
    import tomlkit

    containerd = _table(_table(_table(doc, "plugins"), CRI[version]), "containerd")
    runtime = tomlkit.table()
    runtime["runtime_type"] = "io.containerd.runc.v2"
    runtime["pod_annotations"] = [PREFIX + k for k in pod_keys()]
    runtime["container_annotations"] = [PREFIX + ALLOCATION]
    options = tomlkit.table()
    options["BinaryName"] = wanted.shim
    runtime["options"] = options
    _table(containerd, "runtimes")["gpuhook"] = runtime
    return containerd


def _table(parent: Any, key: str) -> Any:
    import tomlkit

    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=True)
    return parent[key]
