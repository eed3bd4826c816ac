"""The shim's GPU path: request -> inventory -> plan -> edited spec. Loaded only when a request may exist."""

from __future__ import annotations

import os

from gpuhook import compat, logs
from gpuhook.config import from_table
from gpuhook.discover import discover
from gpuhook.edits import merge
from gpuhook.errors import ConfigError
from gpuhook.plan import edits_for, select_all
from gpuhook.request import env_map, parse_request
from gpuhook.root import Root
from gpuhook.spec import apply_edits, rootfs

TYPE_CHECKING = False  # typing costs milliseconds to import: the GPU path sits in front of a container start
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.spec import Spec


def edited_spec(spec: Spec, bundle: str, container_id: str, table: dict[str, Any], config_path: str,
                validated: bool = False) -> tuple[Spec | None, tuple[str, ...]]:
    """The spec with the container's GPUs added (None when it asks for nothing) and warnings for the user.
    Reads the host and the image's files; PolicyError when the image cannot work on the host."""
    config = from_table(table, config_path, validated)
    log = logs.logger(config, container_id, "shim")
    annotations = spec.get("annotations") or {}
    env = env_map((spec.get("process") or {}).get("env") or [])
    request = parse_request(annotations, env, config.policy.accept_env_requests)
    if not request.wants_gpus:
        log.debug("no gpu request")
        return None, ()
    root = Root(config.host_root)
    inventory = discover(root)
    selected = select_all(request, inventory)
    root_path = rootfs(spec, bundle)
    image = Root(root_path) if os.path.isdir(root_path) else None
    verdict = compat.check(selected, env, annotations, root, image, config.policy.rocm_compatibility)
    edits = merge([verdict.edits, edits_for(selected, request, inventory)])
    if edits.ldcache_dirs and not os.access(config.ldconfig, os.X_OK):
        raise ConfigError(f"the host's ldconfig {config.ldconfig} is missing or not executable: install "
                          "libc-bin or set `ldconfig` in " + config.path)
    new = apply_edits(spec, edits, root_path, config.ldconfig)
    for w in verdict.warnings:
        log.warning("compatibility", detail=w)
    log.info("injecting", gpus=[s.raw for s in request.selections], sources=[s.source for s in request.selections],
             capabilities=sorted(request.capabilities), devices=[n.path for n in edits.device_nodes],
             mounts=len(edits.mounts), gids=list(edits.additional_gids))
    return new, verdict.warnings
