"""Docker's daemon.json: runtimes.gpuhook, optionally default-runtime and features.cdi; every other key kept."""

from __future__ import annotations

import json
from typing import Any

from gpuhook import fastjson
from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError


def edit(old: str, wanted: Wanted) -> str:
    """daemon.json text with gpuhook registered."""
    try:
        data: Any = fastjson.loads(old) if old.strip() else {}  # bounded in depth
    except ValueError as e:
        raise EngineConfigError(f"daemon.json is not valid JSON ({e}): fix it first, gpuhook will not guess") from e
    if not isinstance(data, dict):
        raise EngineConfigError("daemon.json is not a JSON object")
    runtimes: Any = data.setdefault("runtimes", {})
    if not isinstance(runtimes, dict):
        raise EngineConfigError("daemon.json's runtimes is not an object")
    entry: dict[str, Any] = runtimes["gpuhook"] if isinstance(runtimes.get("gpuhook"), dict) else {}
    runtimes["gpuhook"] = {**entry, "path": wanted.shim}
    if wanted.set_default:
        data["default-runtime"] = "gpuhook"
    if wanted.cdi:
        features = data.setdefault("features", {})
        if not isinstance(features, dict):
            raise EngineConfigError("daemon.json's features is not an object")
        features["cdi"] = True
    return json.dumps(data, indent=2) + "\n"
