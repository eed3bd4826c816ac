from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuhook.errors import PlanError, PolicyError, RequestError
from gpuhook.plan import host_rocm
from gpuhook.request.container import HostRocm
from tests.unit.parsing import parse_request

FakeHost = Callable[..., str]

PARSE = [("true", HostRocm()), ("false", None), ("6.2", HostRocm("6.2")), ("6.2.1,override", HostRocm("6.2.1", True)),
         ("TRUE,override", HostRocm(None, True))]


@pytest.mark.parametrize(("value", "expect"), PARSE, ids=[p[0] for p in PARSE])
def test_parse(value: str, expect: HostRocm | None) -> None:
    req = parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/host-rocm": value}, {})
    assert req.host_rocm == expect and req.host_rocm_asked


@pytest.mark.parametrize("value", ["yes", "6.x", "6.2,force", ",override", "1.2.3.4"])
def test_parse_errors(value: str) -> None:
    with pytest.raises(RequestError, match=r"gpuhook\.dev/host-rocm"):
        parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/host-rocm": value}, {})


def _trees(*versions: str, default: str = "") -> tuple[host_rocm.RocmTree, ...]:
    return tuple(host_rocm.RocmTree(v, f"/opt/rocm-{v}", (f"/opt/rocm-{v}/lib",), v == default) for v in versions)


CHOOSE = [
    ("newest the driver supports", _trees("5.7.1", "6.2.1", "6.4.0", "7.0.0"), HostRocm(), "6.8.5", "6.4.0"),
    ("named by prefix", _trees("6.1.2", "6.2.0", "6.2.4"), HostRocm("6.2"), "6.8.5", "6.2.4"),
    ("named exactly", _trees("6.2.0", "6.2.4"), HostRocm("6.2.0"), "6.8.5", "6.2.0"),
    ("in-kernel driver: /opt/rocm's", _trees("6.1.2", "6.2.4", default="6.1.2"), HostRocm(), None, "6.1.2"),
    ("unknown driver: newest", _trees("6.1.2", "6.2.4"), HostRocm(), "6.9.1", "6.2.4"),
]


@pytest.mark.parametrize(("trees", "asked", "driver", "version"), [c[1:] for c in CHOOSE], ids=[c[0] for c in CHOOSE])
def test_choose(trees: tuple[host_rocm.RocmTree, ...], asked: HostRocm, driver: str | None, version: str) -> None:
    assert host_rocm.choose(trees, asked, driver).version == version


@pytest.mark.parametrize(("trees", "asked", "needle"), [
    ((), HostRocm(), "no /opt/rocm-<version>"),
    (_trees("6.1.2"), HostRocm("6.3"), "host has ROCm 6.1.2"),
    (_trees("5.6.0"), HostRocm(), "supports ROCm 6.0 to 6.4"),
], ids=["none", "named absent", "none supported"])
def test_choose_errors(trees: tuple[host_rocm.RocmTree, ...], asked: HostRocm, needle: str) -> None:
    with pytest.raises(PlanError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        host_rocm.choose(trees, asked, "6.8.5")


def test_plan_prepends_path_and_mounts_read_only() -> None:
    (tree,) = _trees("6.2.1")
    edits = host_rocm.plan(tree, "/srv/host", {"PATH": "/usr/bin:/bin"})
    assert [(m.host_path, m.container_path) for m in edits.mounts] == [("/srv/host/opt/rocm-6.2.1", "/opt/rocm-6.2.1"),
                                                                       ("/srv/host/opt/rocm-6.2.1", "/opt/rocm")]
    assert all("ro" in m.options for m in edits.mounts)
    assert edits.env == ("ROCM_PATH=/opt/rocm-6.2.1", "PATH=/opt/rocm-6.2.1/bin:/usr/bin:/bin")


def test_image_conflict() -> None:
    (tree,) = _trees("6.2.1")
    host_rocm.check_image(None, tree, HostRocm())
    host_rocm.check_image("6.2.1", tree, HostRocm())
    host_rocm.check_image("6.1.0", tree, HostRocm(None, True))
    with pytest.raises(PolicyError, match=r"ships ROCm 6\.1\.0"):
        host_rocm.check_image("6.1.0", tree, HostRocm())
