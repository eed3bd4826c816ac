"""Edits own their algebra: every field is merged, written into a spec, found again in it (hook mode applies
only what is lacking), carried into CDI or refused there, and said for in hook mode. A field that one consumer
skips fails here."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhook.apply import cdi_edits, live, spec_edits
from gpuhook.apply.cdi_edits import CdiContext, to_cdi
from gpuhook.apply.spec import apply_edits
from gpuhook.apply.spec_edits import lacking
from gpuhook.edits import FIELDS, DeviceNode, DeviceRule, Edits, Hook, Mount, ProcOverlay, merge
from gpuhook.errors import CdiError
from gpuhook.testing.bundle import oci_config

NODE = DeviceNode(path="/dev/toy0", kind="c", major=240, minor=0, mode=0o660, uid=0, gid=109)
SAMPLE: dict[str, Any] = {
    "device_nodes": NODE,
    "device_rules": DeviceRule("c", 240, 0),
    "mounts": Mount("/host/lib/libtoy.so.1", "/usr/lib/libtoy.so.1"),
    "env": "TOY_ENV=1",
    "additional_gids": 109,
    "hooks": Hook(stage="poststop", path="/usr/bin/gpuhook", args=("gpuhook", "hook", "poststop")),
    "masked_paths": "/sys/class/toy/proc",
    "readonly_mounts": "/sys",
    "proc_overlays": ProcOverlay("/run/gpuhook/toy-procfs/1", "/proc/driver/toy"),
    "ldcache_dirs": "/usr/lib/toy",
}
NOT_IN_CDI = {"masked_paths", "readonly_mounts", "proc_overlays"}  # CDI has no field for these
NAMES = [f.name for f in FIELDS]
CTX = CdiContext(host_base="/", gpuhook_bin="/usr/bin/gpuhook", config_path="/etc/gpuhook/config.toml")


def _spec() -> dict[str, Any]:
    spec = oci_config(["true"])
    for m in spec["mounts"]:
        if m["destination"] == "/sys":
            m["options"] = ["nosuid", "noexec", "nodev"]  # read-write, so that read-only is an edit
    return spec


def _one(name: str) -> Edits:
    return Edits(**{name: (SAMPLE[name],)})


def test_the_table_lists_every_field_once() -> None:
    assert list(Edits.__annotations__) == NAMES and len(set(NAMES)) == len(NAMES)
    assert set(SAMPLE) == set(NAMES)
    assert set(live.LIVE) == set(NAMES) and set(live.UNAPPLIED) < set(NAMES)
    assert list(spec_edits.WRITERS) == NAMES and list(cdi_edits.WRITERS) == NAMES  # every consumer, every field


@pytest.mark.parametrize("name", NAMES)
def test_merge_keeps_a_field_once(name: str) -> None:
    one = _one(name)
    assert not one.is_empty()
    assert merge([Edits(), one, one]) == one


@pytest.mark.parametrize("name", NAMES)
def test_a_field_changes_the_spec_and_is_then_not_lacking(name: str) -> None:
    spec, one = _spec(), _one(name)
    assert lacking(one, spec) == one  # nothing of it is there yet
    applied = apply_edits(spec, one, "/b/rootfs", "/sbin/ldconfig")
    assert applied != spec
    assert lacking(one, applied).is_empty()
    assert apply_edits(applied, one, "/b/rootfs", "/sbin/ldconfig") == applied  # idempotent


@pytest.mark.parametrize("name", NAMES)
def test_a_field_goes_into_cdi_or_is_refused_there(name: str) -> None:
    one = Edits.for_nodes([NODE]) if name == "device_rules" else _one(name)
    if name in NOT_IN_CDI:
        with pytest.raises(CdiError, match="CDI has no field"):
            to_cdi(one, CTX)
        return
    out = to_cdi(one, CTX)
    assert out and all(out.values())


def test_cdi_refuses_a_rule_without_its_node() -> None:
    with pytest.raises(CdiError, match="no node for"):
        to_cdi(_one("device_rules"), CTX)


def test_env_is_lacking_until_the_same_value_is_there() -> None:
    spec = _spec()
    spec["process"]["env"].append("TOY_ENV=0")
    assert lacking(_one("env"), spec).env == ("TOY_ENV=1",)
    assert apply_edits(spec, _one("env"), "/r", "/l")["process"]["env"].count("TOY_ENV=1") == 1


def test_for_nodes_derives_rules_and_groups_once() -> None:
    other = DeviceNode(path="/dev/toy1", kind="c", major=240, minor=1, mode=0o666, uid=0,
                       gid=44)  # everyone may open it: no group needed
    e = Edits.for_nodes([NODE, other])
    assert e.device_rules == (DeviceRule("c", 240, 0), DeviceRule("c", 240, 1))
    assert e.additional_gids == (109,)
