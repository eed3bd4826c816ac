from __future__ import annotations

import pytest

from gpuhook.errors import RequestError
from gpuhook.request.container import Request, Selection, env_map
from tests.unit.parsing import parse_request

A = "gpuhook.dev/"
UUID = "GPU-0000000a-1111-2222-3333-444455556666"
MIG = "MIG-0000000a-1111-2222-3333-444455556666"

PARSES = [
    ("nothing", {}, {}, ()),
    ("annotation all", {A + "gpus": "all"}, {}, (Selection(vendor=None, devices=None, source=A + "gpus", raw="all"),)),
    ("annotation none", {A + "gpus": "none"}, {"NVIDIA_VISIBLE_DEVICES": "all"}, ()),
    ("indices, dupes dropped", {A + "gpus": "1, 0,1"}, {}, (Selection(vendor=None, devices=("1", "0"),
                                                                      source=A + "gpus", raw="1, 0,1"),)),
    ("range", {A + "gpus": "0-2"}, {}, (Selection(vendor=None, devices=("0", "1", "2"), source=A + "gpus",
                                                  raw="0-2"),)),
    ("uuid upper", {A + "gpus": UUID.upper().replace("GPU", "GPU")}, {},
     (Selection(vendor=None, devices=(UUID,), source=A + "gpus", raw=UUID.upper()),)),
    ("amd uuid", {A + "gpus": "0xABC"}, {}, (Selection(vendor=None, devices=("0xabc",), source=A + "gpus",
                                                       raw="0xABC"),)),
    ("short pci", {A + "gpus": "3b:00.0"}, {}, (Selection(vendor=None, devices=("0000:3b:00.0",), source=A + "gpus",
                                                          raw="3b:00.0"),)),
    ("vendor", {A + "gpus": "0", A + "vendor": "AMD"}, {}, (Selection(vendor="amd", devices=("0",), source=A + "gpus",
                                                                      raw="0"),)),
    ("annotation beats env", {A + "gpus": "1"}, {"NVIDIA_VISIBLE_DEVICES": "all"},
     (Selection(vendor=None, devices=("1",), source=A + "gpus", raw="1"),)),
    ("nvidia env all", {}, {"NVIDIA_VISIBLE_DEVICES": "all"},
     (Selection(vendor="nvidia", devices=None, source="NVIDIA_VISIBLE_DEVICES", raw="all"),)),
    ("nvidia env none = driver only", {}, {"NVIDIA_VISIBLE_DEVICES": "none"},
     (Selection(vendor="nvidia", devices=(), source="NVIDIA_VISIBLE_DEVICES", raw="none"),)),
    ("nvidia env void", {}, {"NVIDIA_VISIBLE_DEVICES": "void"}, ()),
    ("nvidia env empty", {}, {"NVIDIA_VISIBLE_DEVICES": ""}, ()),
    ("amd env range", {}, {"AMD_VISIBLE_DEVICES": "0-1,3"},
     (Selection(vendor="amd", devices=("0", "1", "3"), source="AMD_VISIBLE_DEVICES", raw="0-1,3"),)),
    ("both envs", {}, {"NVIDIA_VISIBLE_DEVICES": "0", "AMD_VISIBLE_DEVICES": "all"},
     (Selection(vendor="nvidia", devices=("0",), source="NVIDIA_VISIBLE_DEVICES", raw="0"),
      Selection(vendor="amd", devices=None, source="AMD_VISIBLE_DEVICES", raw="all"))),
    ("other annotations ignored", {"io.kubernetes.pod": "x"}, {}, ()),
    ("mig index form", {A + "gpus": "0:1,1:03"}, {}, (Selection(vendor=None, devices=("0:1", "1:3"), source=A + "gpus",
                                                                raw="0:1,1:03"),)),
    ("mig uuid upper", {A + "gpus": MIG.upper().replace("MIG", "MIG")}, {},
     (Selection(vendor=None, devices=(MIG,), source=A + "gpus", raw=MIG.upper()),)),
    ("mig env, uuid beside a gpu", {}, {"NVIDIA_VISIBLE_DEVICES": f"{MIG},0"},
     (Selection(vendor="nvidia", devices=(MIG, "0"), source="NVIDIA_VISIBLE_DEVICES", raw=f"{MIG},0"),)),
]


@pytest.mark.parametrize(("annotations", "env", "selections"), [p[1:] for p in PARSES], ids=[p[0] for p in PARSES])
def test_parse(annotations: dict[str, str], env: dict[str, str], selections: tuple[Selection, ...]) -> None:
    assert parse_request(annotations, env).selections == selections


def test_env_off_by_policy() -> None:
    assert parse_request({}, {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "video"},
                         accept_env=False) == Request()


CAPS = [
    ("default", {}, {}, {"compute", "utility"}),
    ("env", {}, {"NVIDIA_DRIVER_CAPABILITIES": "video,compute"}, {"video", "compute"}),
    ("env empty is default", {}, {"NVIDIA_DRIVER_CAPABILITIES": ""}, {"compute", "utility"}),
    ("annotation wins", {A + "capabilities": "graphics"}, {"NVIDIA_DRIVER_CAPABILITIES": "video"}, {"graphics"}),
    ("all", {A + "capabilities": "all"}, {},
     {"compute", "utility", "video", "graphics", "display", "compat32", "ngx"}),
]


@pytest.mark.parametrize(("annotations", "env", "caps"), [c[1:] for c in CAPS], ids=[c[0] for c in CAPS])
def test_capabilities(annotations: dict[str, str], env: dict[str, str], caps: set[str]) -> None:
    assert parse_request({A + "gpus": "all", **annotations}, env).capabilities == caps


ERRORS = [
    ("unknown key", {A + "gpu": "0"}, {}, ["gpuhook.dev/gpu", "'0'"]),
    ("bad item", {A + "gpus": "0,zero"}, {}, ["gpuhook.dev/gpus", "'0,zero'", "'zero'"]),
    ("empty annotation", {A + "gpus": ""}, {}, ["gpuhook.dev/gpus", "''"]),
    ("empty item", {A + "gpus": "0,,1"}, {}, ["gpuhook.dev/gpus"]),
    ("reversed range", {A + "gpus": "3-1"}, {}, ["'3-1'"]),
    ("bad vendor", {A + "gpus": "0", A + "vendor": "intel"}, {}, ["gpuhook.dev/vendor", "'intel'", "nvidia"]),
    ("vendor without gpus", {A + "vendor": "amd"}, {}, ["gpuhook.dev/vendor", "gpuhook.dev/gpus"]),
    ("bad capability", {A + "gpus": "0", A + "capabilities": "compute,gaming"}, {}, ["capabilities", "'gaming'"]),
    ("bad env", {}, {"NVIDIA_VISIBLE_DEVICES": "MIG-1/2"}, ["NVIDIA_VISIBLE_DEVICES", "'MIG-1/2'", "<gpu>:<mig>"]),
    ("mig index form, three parts", {A + "gpus": "0:1:2"}, {}, ["'0:1:2'", "MIG-…"]),
    ("mig index form, no mig", {A + "gpus": "0:"}, {}, ["'0:'"]),
    ("bad env caps", {}, {"NVIDIA_VISIBLE_DEVICES": "0", "NVIDIA_DRIVER_CAPABILITIES": "x"},
     ["NVIDIA_DRIVER_CAPABILITIES"]),
    ("bad clocks", {A + "gpus": "0", A + "clocks": "fast"}, {}, ["gpuhook.dev/clocks", "'fast'", "MHz"]),
]


@pytest.mark.parametrize(("annotations", "env", "needles"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_key_and_value(annotations: dict[str, str], env: dict[str, str], needles: list[str]) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(annotations, env)
    for needle in needles:
        assert needle in str(info.value)


def test_env_map_last_wins_and_skips_bare() -> None:
    assert env_map(["A=1", "B", "A=2=3"]) == {"A": "2=3"}
