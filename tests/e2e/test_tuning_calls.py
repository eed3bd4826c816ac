"""Tuning in one short call per hook (#46 item 3), through the real shim and real runc on a simulated host: the
prestart hook and the poststop hook each bind NVML once (one session, whatever the GPUs and settings), the shim's
range check binds it only for a value the GPU has not taken before under its driver, a container joining a setting
another holds gets no tuning call at all (the shim joins it in the ledger), and a value the GPU already has is never
written. Counted through the stub NVML's
sessions (nvml.inits) and its log of changes; what the container gets is read from the simulated GPU's state."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .tuned import Tuned, _run_detached

NV = {"gpuhook.dev/vendor": "nvidia"}


def _inits(t: Tuned) -> int:
    path = Path(f"{t.host}/var/lib/gpuhook-sim/nvml.inits")
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_each_hook_binds_nvml_once_and_the_shim_only_on_first_sight(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=2))
    asked = {**NV, "gpuhook.dev/gpus": "0,1", "gpuhook.dev/clocks": "1500", "gpuhook.dev/power-limit": "400"}
    cid, r = t.start(asked)
    assert r.returncode == 0, r.stderr
    assert t.nvml()[0][:3] == t.nvml()[1][:3] == [1500, 1500, 400000]
    assert _inits(t) == 2  # the shim's check, then the prestart hook: one session each for 2 GPUs x 2 settings
    t.stop(cid)
    assert t.nvml()[0][:3] == t.nvml()[1][:3] == [0, 0, 700000]
    assert _inits(t) == 3  # the poststop hook's one
    cid, r = t.start(asked)
    assert r.returncode == 0, r.stderr
    assert t.nvml()[0][:3] == t.nvml()[1][:3] == [1500, 1500, 400000]
    assert _inits(t) == 4  # the values were taken before under this driver: the shim binds nothing, the prestart once
    t.stop(cid)
    assert _inits(t) == 5
    assert t.nvml()[0][:3] == [0, 0, 700000]
    assert t.log("nvml") == ["set-clocks", "set-power", "set-clocks", "set-power", "set-power", "reset-clocks",
                             "set-power", "reset-clocks"] * 2


def test_a_container_joining_a_held_setting_gets_no_tuning_call(tuned) -> None:  # type: ignore[no-untyped-def]
    """The second container asks what GPU 0 already holds for the first: the shim records it as a holder in the
    ledger and gives it no prestart hook to tune (its poststop hook stays), nothing binds NVML for it, it sees the
    clocks locked, and they are unlocked only after the last of the two stops."""
    t = tuned(HostSpec(nvidia=1))
    asked = {**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1500"}
    first, r = t.start(asked)
    assert r.returncode == 0, r.stderr
    before = _inits(t)
    second = "t-" + uuid.uuid4().hex[:10]
    bundle = t.bundle(asked, ["sleep", "60"])
    r = _run_detached(conftest.SHIM, bundle, second, t.env)
    t.started.append(second)
    assert r.returncode == 0, r.stderr
    hooks = json.loads((bundle / "config.json").read_text())["hooks"]
    assert not [h for h in hooks.get("prestart", []) if h["args"][1:] == ["hook", "prestart"]]
    assert [h["args"][1:] for h in hooks["poststop"]] == [["hook", "poststop"]]
    assert _inits(t) == before  # joined in the ledger by the shim: no session, no write
    assert t.nvml()[0][:2] == [1500, 1500]
    assert second in t.gpuhook("status").stdout
    t.stop(first)
    assert t.nvml()[0][:2] == [1500, 1500] and _inits(t) == before  # the second still holds it: nothing restored
    t.stop(second)
    assert t.nvml()[0][:2] == [0, 0]
    assert t.log("nvml") == ["set-clocks", "reset-clocks"]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_a_joined_container_runc_never_made_does_not_keep_the_setting(tuned) -> None:  # type: ignore[no-untyped-def]
    """The shim joins the second container to the held clocks, then runc fails to create it (its process does not
    exist): when the first stops, its poststop finds the second gone and restores the clocks."""
    t = tuned(HostSpec(nvidia=1))
    asked = {**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1500"}
    first, r = t.start(asked)
    assert r.returncode == 0, r.stderr

    def broken(spec: dict[str, Any]) -> None:
        spec["process"]["cwd"] = "relative"  # runc refuses the spec before it makes anything

    cid = "t-" + uuid.uuid4().hex[:10]
    r = _run_detached(conftest.SHIM, t.bundle(asked, ["sleep", "60"], broken), cid, t.env)
    t.started.append(cid)
    assert r.returncode != 0
    assert t.nvml()[0][:2] == [1500, 1500]
    t.stop(first)
    assert t.nvml()[0][:2] == [0, 0]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_a_value_the_gpu_already_has_is_never_written(tuned) -> None:  # type: ignore[no-untyped-def]
    """power-limit=700 on a board at 700 W: held while the container lives (status shows it), never written, nothing
    to restore."""
    t = tuned(HostSpec(nvidia=1))
    cid, r = t.start({**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/power-limit": "700"})
    assert r.returncode == 0, r.stderr
    assert "power_limit" in t.gpuhook("status").stdout
    t.stop(cid)
    assert t.log("nvml") == []  # neither set nor restored
    assert "no GPU tuning is held" in t.gpuhook("status").stdout
