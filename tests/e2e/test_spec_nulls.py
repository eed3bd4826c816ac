"""JSON null inside a spec, differentially: each spec is run by plain runc first; one runc accepts must run through
gpuhook too, in both modes, with its GPU, and one runc refuses is refused either way (gpuhook passes it on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Run

NV = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}


def _set(path: str, value: Any) -> Any:
    def edit(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        if isinstance(node.get(last), list) and isinstance(value, list):
            node[last] = [*node[last], *value]
        elif isinstance(node.get(last), dict) and isinstance(value, dict):
            node[last] = {**node[last], **value}
        else:
            node[last] = value
    return edit


CASES = [("annotations", {"example.com/note": None, "io.kubernetes.cri.container-name": None}),
         ("process.env", [None]),
         ("process.user.additionalGids", [None]),
         ("process.user.gid", None),
         ("linux.maskedPaths", [None]),
         ("linux.resources.devices", [{"allow": True, "type": "c", "major": None, "minor": None, "access": "rwm"}]),
         ("linux.resources.devices", [{"allow": True, "type": "c", "major": 1, "minor": None, "access": "rw"}]),
         ("linux.resources.devices", [{"allow": False, "type": "b", "major": None, "minor": 3, "access": "m"}])]


@pytest.mark.parametrize(("path", "value"), CASES, ids=[f"{p}={v}" for p, v in CASES])
def test_gpuhook_takes_what_runc_takes(mixed_host: str, run_container: Run, tmp_path: Path, path: str,
                                          value: Any) -> None:
    plain = run_container(mixed_host, "true", spec_edit=lambda s: (_set(path, value)(s), s.pop("hooks", None)),
                          mode="hook")
    for mode in ("shim", "hook"):
        r = run_container(mixed_host, "ls /dev", NV, spec_edit=_set(path, value), mode=mode)
        assert (r.rc == 0) == (plain.rc == 0), (mode, plain.err, r.err)
        assert r.rc != 0 or "nvidia0" in r.out.split(), (mode, r.err)
        assert "Traceback" not in r.err
