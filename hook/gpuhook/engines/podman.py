"""Podman (and CRI-O's hooks_dir): the hooks.d JSON that runs `gpuhook hook` for gpuhook.dev/ annotations."""

from __future__ import annotations

import json

from gpuhook.engines.wanted import Wanted

HOOK_TIMEOUT = 90  # seconds: above the hook's own deadline for each helper it runs (hook_timeout, default 30)


def render(wanted: Wanted) -> str:
    """The hooks.d file's text (version 1.0.0, prestart and poststop, the stage read from the state)."""
    return json.dumps({
        "version": "1.0.0",
        "hook": {"path": wanted.gpuhook, "args": ["gpuhook", "hook"], "env": [f"GPUHOOK_CONFIG={wanted.config}"],
                 "timeout": HOOK_TIMEOUT},
        "when": {"annotations": {"^gpuhook\\.dev/": ".*"}},
        "stages": ["prestart", "poststop"],
    }, indent=2) + "\n"
