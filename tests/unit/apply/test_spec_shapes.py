"""Every config.json runc accepts is accepted: null stands for absent; a wrong type is one line naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuhook.apply.spec import apply_edits, load_spec
from gpuhook.edits import DeviceNode, Edits, Hook, Mount
from gpuhook.errors import SpecError

EDITS = Edits.for_nodes([DeviceNode(path="/dev/nvidia0", kind="c", major=195, minor=0, mode=0o660, uid=0, gid=44)])
EDITS = Edits(**{**{f: getattr(EDITS, f) for f in ("device_nodes", "device_rules", "additional_gids")},
                 "mounts": (Mount("/h/l.so", "/usr/lib/l.so"),), "env": ("A=1",), "masked_paths": ("/x",),
                 "hooks": (Hook(stage="prestart", path="/g", args=("g",)),), "ldcache_dirs": ("/usr/lib",)})
NULLS = ["annotations", "process", "root", "mounts", "linux", "hooks", "linux.devices", "linux.resources",
         "linux.resources.devices", "linux.maskedPaths", "process.env", "process.user",
         "process.user.additionalGids", "hooks.createContainer", "hooks.prestart"]


def _with(path: str, value: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"ociVersion": "1.0.2", "process": {"user": {"uid": 0, "gid": 0}, "env": []},
                            "linux": {"resources": {}}, "hooks": {}, "mounts": []}
    *parents, last = path.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return spec


@pytest.mark.parametrize("field", NULLS)
def test_null_is_absent(field: str) -> None:
    spec = load_spec(json.dumps(_with(field, None)).encode(), "config.json")
    out = apply_edits(spec, EDITS, "/r", "/sbin/ldconfig")
    assert out["linux"]["devices"][0]["path"] == "/dev/nvidia0" and "A=1" in out["process"]["env"]


WRONG = [("annotations", ["a"]), ("process.env", {"A": "1"}), ("linux.devices", "x"), ("mounts", {}),
         ("hooks", []), ("hooks.prestart", {"path": "/x"}), ("linux.devices", [{"major": "195"}]),
         ("process.user.uid", "0"), ("annotations", {"gpuhook.dev/gpus": 0}), ("root.path", 7),
         ("linux.resources.devices", [{"major": [1]}]), ("hooks.prestart", ["/x"])]


@pytest.mark.parametrize(("field", "value"), WRONG, ids=[f"{f}={json.dumps(v)}" for f, v in WRONG])
def test_a_wrong_type_is_one_line_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(json.dumps(_with(field, value)).encode(), "config.json")
    assert field.split(".")[0] in str(info.value) and "\n" not in str(info.value)


def test_deep_nesting_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="nests too deeply"):
        load_spec(b"[" * 100_000 + b"]" * 100_000, "config.json")


# null inside a field, where runc's Go decoding takes it: "" for a string, 0 for a number, nil (any) for a device
# rule's major or minor (tests/e2e/test_spec_nulls.py runs each through real runc)
INNER_NULLS = [("annotations", {"other/key": None, "io.kubernetes.cri.container-name": None}),
               ("process.env", ["A=1", None]), ("process.user.additionalGids", [None, 44]),
               ("process.user.uid", None), ("process.user.gid", None), ("linux.maskedPaths", [None]),
               ("linux.devices", [{"path": "/dev/x", "type": "c", "major": None, "minor": None}]),
               ("linux.resources.devices", [{"allow": False, "type": "c", "major": None, "minor": None,
                                             "access": "m"}])]


@pytest.mark.parametrize(("field", "value"), INNER_NULLS, ids=[f"{f}={json.dumps(v)}" for f, v in INNER_NULLS])
def test_null_inside_a_field_is_what_runc_makes_of_it(field: str, value: Any) -> None:
    from gpuhook.request.container import env_map
    from tests.unit.parsing import parse_request

    spec = load_spec(json.dumps(_with(field, value)).encode(), "config.json")
    out = apply_edits(spec, EDITS, "/r", "/sbin/ldconfig")
    assert out["linux"]["devices"][-1]["path"] == "/dev/nvidia0" or out["linux"]["devices"][0]["path"] == "/dev/x"
    env = env_map(out["process"]["env"])
    assert parse_request(out.get("annotations") or {}, env).selections == ()


def test_a_null_gpuhook_annotation_is_an_empty_value() -> None:
    from gpuhook.errors import RequestError
    from tests.unit.parsing import parse_request

    for key in ("gpus", "exclusive", "clocks"):  # "" to runc: a value gpuhook names, not a crash
        with pytest.raises(RequestError, match=f"gpuhook.dev/{key}=''"):
            parse_request({f"gpuhook.dev/{key}": None}, {})  # type: ignore[dict-item]
