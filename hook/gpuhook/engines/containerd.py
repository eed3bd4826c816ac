"""containerd's config.toml (version 2 or 3): a gpuhook runtime (runc v2 shim, BinaryName = gpuhook-runtime,
pod_annotations gpuhook.dev/*), edited with tomlkit so that comments and unrelated settings stay."""

from __future__ import annotations

from typing import Any

from gpuhook.engines.registration import Wanted
from gpuhook.errors import EngineConfigError

CRI = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


def edit(old: str, wanted: Wanted) -> str:
    """config.toml text with the gpuhook runtime (and default_runtime_name when asked)."""
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
    containerd = _table(_table(_table(doc, "plugins"), CRI[version]), "containerd")
    runtime = tomlkit.table()
    runtime["runtime_type"] = "io.containerd.runc.v2"
    runtime["pod_annotations"] = ["gpuhook.dev/*"]
    options = tomlkit.table()
    options["BinaryName"] = wanted.shim
    runtime["options"] = options
    _table(containerd, "runtimes")["gpuhook"] = runtime
    if wanted.set_default:
        containerd["default_runtime_name"] = "gpuhook"
    return tomlkit.dumps(doc)


def _table(parent: Any, key: str) -> Any:
    import tomlkit

    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=True)
    return parent[key]
