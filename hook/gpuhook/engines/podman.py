"""Podman (and CRI-O's hooks_dir): the hooks.d JSON that runs `gpuhook hook` for gpuhook.dev/ annotations."""

from __future__ import annotations

import json

from gpuhook.engines.registration import Wanted


def render(wanted: Wanted) -> str:
    """The hooks.d file's text (version 1.0.0, prestart and poststop, the stage read from the state)."""
    return json.dumps({
        "version": "1.0.0",
        "hook": {"path": wanted.gpuhook, "args": ["gpuhook", "hook"], "env": [f"GPUHOOK_CONFIG={wanted.config}"]},
        "when": {"annotations": {"^gpuhook\\.dev/": ".*"}},
        "stages": ["prestart", "poststop"],
    }, indent=2) + "\n"
