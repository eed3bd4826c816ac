"""The shim's GPU path: request -> inventory -> plan -> edited spec. Loaded only when a request may exist."""

from __future__ import annotations

import os

from gpuhook import compat, logs
from gpuhook.config import Config, from_table
from gpuhook.discover import discover
from gpuhook.edits import Edits, merge
from gpuhook.errors import ConfigError, PolicyError
from gpuhook.plan import edits_for, select_all
from gpuhook.record import record
from gpuhook.request import env_map, parse_request
from gpuhook.root import Root
from gpuhook.safepath import InRoot
from gpuhook.spec import apply_edits, rootfs

TYPE_CHECKING = False  # typing costs milliseconds to import: the GPU path sits in front of a container start
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.spec import Spec


@record
class Prepared:
    """A GPU container's edits, and the warnings for its user."""

    edits: Edits
    warnings: tuple[str, ...]


def prepare(spec: Spec, bundle: str, config: Config, log: Any) -> Prepared | None:
    """What the container asked for, checked against the host and the image, as Edits; None when it asks for
    nothing. Reads the host and the image's files; RequestError/PlanError/PolicyError when it cannot start."""
    annotations = spec.get("annotations") or {}
    env = env_map((spec.get("process") or {}).get("env") or [])
    request = parse_request(annotations, env, config.policy.accept_env_requests)
    if not request.wants_gpus:
        log.debug("no gpu request")
        return None
    root = Root(config.host_root)
    inventory = discover(root)
    selected = select_all(request, inventory)
    root_path = rootfs(spec, bundle)
    dev = os.path.join(root_path, "dev")
    if os.path.islink(dev):
        raise PolicyError(f"the image's /dev is a symbolic link (to {os.readlink(dev)!r}): runc follows it out of "
                          "the container when it sets up /dev, so gpuhook refuses to start this GPU container")
    image = InRoot(root_path) if os.path.isdir(root_path) else None
    try:
        verdict = compat.check(selected, env, annotations, root, image, config.policy.rocm_compatibility)
    finally:
        if image:
            image.close()
    edits = merge([verdict.edits, edits_for(selected, request, inventory)])
    if edits.ldcache_dirs and not os.access(config.ldconfig, os.X_OK):
        raise ConfigError(f"the host's ldconfig {config.ldconfig} is missing or not executable: install "
                          "libc-bin or set `ldconfig` in " + config.path)
    for w in verdict.warnings:
        log.warning("compatibility", detail=w)
    log.info("injecting", gpus=[s.raw for s in request.selections], sources=[s.source for s in request.selections],
             capabilities=sorted(request.capabilities), devices=[n.path for n in edits.device_nodes],
             mounts=len(edits.mounts), gids=list(edits.additional_gids))
    return Prepared(edits, verdict.warnings)


def edited_spec(spec: Spec, bundle: str, container_id: str, table: dict[str, Any], config_path: str,
                validated: bool = False) -> tuple[Spec | None, tuple[str, ...]]:
    """The spec with the container's GPUs added (None when it asks for nothing) and warnings for the user."""
    config = from_table(table, config_path, validated)
    prepared = prepare(spec, bundle, config, logs.logger(config, container_id, "shim"))
    if prepared is None:
        return None, ()
    return apply_edits(spec, prepared.edits, rootfs(spec, bundle), config.ldconfig), prepared.warnings
