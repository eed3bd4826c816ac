"""CDI specs as container-device-interface reads them, version by version: literals in, the engines' own
refusals out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuhook.apply.cdi_rules import problems, required_version

NODE = {"path": "/dev/dri/renderD128", "hostPath": "/dev/dri/renderD128", "type": "c", "major": 226, "minor": 128}
AMD: dict[str, Any] = {  # what `gpuhook cdi generate` writes for AMD, in short
    "cdiVersion": "0.7.0", "kind": "amd.com/gpu",
    "devices": [{"name": "0", "containerEdits": {"deviceNodes": [NODE]}},
                {"name": "all", "containerEdits": {"deviceNodes": [NODE]}}],
    "containerEdits": {"env": ["AMD_VISIBLE_DEVICES=void"], "deviceNodes": [{"path": "/dev/kfd"}],
                       "additionalGids": [109, 44]},
}


def _with(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(AMD)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = spec
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return spec


CASES = [  # (spec, library, what the engine says: a substring of each problem, in order)
    ("0.7.0 spec, Podman 4.3's library", AMD, "0.5.2", ['unknown field "additionalGids" in containerEdits']),
    ("0.7.0 spec, CDI 0.7", AMD, "0.7.2", []),
    ("0.7.0 spec, CDI 0.6 (Podman 5.0)", AMD, "0.6.2", ['unknown field "additionalGids"']),
    ("names are matched as Go does", _with(containerEdits__AdditionalGIDs=[1], containerEdits__additionalGids=None),
     "0.7.2", []),
    ("0.5.0 spec, Podman 4.3", _with(cdiVersion="0.5.0", containerEdits__additionalGids=None), "0.5.2", []),
    ("0.5.0 spec, Podman 4.2 (CDI 0.4)", _with(cdiVersion="0.5.0", containerEdits__additionalGids=None), "0.4.0",
     ['unknown field "hostPath" in devices[0].containerEdits.deviceNodes[0] (a cdiVersion 0.5.0 field']),
    ("a version the library does not know", _with(cdiVersion="0.6.0", containerEdits__additionalGids=None), "0.5.2",
     ["cdiVersion '0.6.0' is not one it knows (0.1.0 to 0.5.0)"]),
    ("too low for its fields, from CDI 0.5.4", _with(cdiVersion="0.5.0"), "0.7.2",
     ["cdiVersion 0.5.0 is lower than its fields need: 0.7.0 (additionalGids)"]),
    ("0.5.3 did not check the minimum", _with(cdiVersion="0.3.0", containerEdits__additionalGids=None), "0.5.3", []),
    ("0.5.4 does", _with(cdiVersion="0.3.0", containerEdits__additionalGids=None), "0.5.4",
     ["lower than its fields need: 0.5.0 (deviceNodes with hostPath)"]),
    ("a wrong type", _with(devices__0__containerEdits__deviceNodes=[{"path": "/d", "major": "226"}]), "0.7.2",
     ["devices[0].containerEdits.deviceNodes[0].major: a string where it takes a number"]),
    ("gids out of range", _with(containerEdits__additionalGids=[-1]), "0.7.2", ["additionalGids: a list"]),
    ("a bad kind", _with(kind="amd"), "0.7.2", ["kind 'amd' is not vendor.tld/class"]),
    ("a dot in the class before 0.6", _with(kind="amd.com/gpu.x", cdiVersion="0.5.0",
                                             containerEdits__additionalGids=None), "0.5.2", ["kind 'amd.com/gpu.x'"]),
    ("a digit-led name before 0.5", _with(cdiVersion="0.4.0", containerEdits__additionalGids=None,
                                          devices__0__containerEdits__deviceNodes=[{"path": "/dev/x"}],
                                          devices__1__containerEdits__deviceNodes=[{"path": "/dev/x"}]), "0.4.0",
     ["device '0': '0' must start with a letter"]),
    ("a name that ends badly", _with(devices__0__name="gpu-"), "0.7.2", ["must end with a letter or a digit"]),
    ("twice the same device", _with(devices__1__name="0"), "0.7.2", ["device '0' is there twice"]),
    ("a device without edits", _with(devices__1__containerEdits={}), "0.7.2", ["device 'all' has no edits"]),
    ("edits it refuses", _with(containerEdits__env=["=x"], containerEdits__hooks=[{"hookName": "onStart", "path": ""}],
                               containerEdits__mounts=[{"hostPath": "", "containerPath": "/x"}],
                               containerEdits__deviceNodes=[{"path": "/dev/kfd", "type": "x", "permissions": "rwx"}]),
     "0.7.2", ["env: '=x'", "type 'x'", "permissions 'rwx'", "hook name 'onStart'", "hook without a path",
               "mount without its hostPath"]),
    ("no devices, from CDI 1.0", _with(devices=[]), "1.0.1", ["the spec has no devices"]),
    ("no devices, CDI 0.8", _with(devices=[]), "0.8.1", []),
    ("not an object", [], "0.5.2", ["holds no CDI spec"]),
    ("a field no version has", _with(containerEdits__cgroups=[]), "1.1.0", ['unknown field "cgroups"']),
]


@pytest.mark.parametrize(("spec", "library", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_each_library_refuses(spec: Any, library: str, expected: list[str]) -> None:
    found = problems(spec, library)
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert want in got


@pytest.mark.parametrize(("spec", "version"), [
    (AMD, "0.7.0"), (_with(containerEdits__additionalGids=None), "0.5.0"),
    (_with(containerEdits__additionalGids=None, devices=[{"name": "gpu", "containerEdits": {"env": ["A=1"]}}]),
     "0.3.0"),
    (_with(containerEdits__additionalGids=None, devices=[{"name": "g", "annotations": {"a": "b"},
                                                           "containerEdits": {"env": ["A=1"]}}]), "0.6.0"),
    (_with(containerEdits__mounts=[{"hostPath": "/a", "containerPath": "/a", "type": "bind"}],
           containerEdits__additionalGids=None, devices=[{"name": "g", "containerEdits": {"env": ["A=1"]}}]), "0.4.0"),
], ids=["gids", "hostPath", "plain", "annotations", "mount-type"])
def test_required_version(spec: dict[str, Any], version: str) -> None:
    assert required_version(spec) == version
