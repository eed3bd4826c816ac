from __future__ import annotations

import pytest

from gpuhook.errors import RequestError
from gpuhook.request.requirements import Condition, Facts, from_container, parse, unmet

HOST = Facts(cuda="12.2", driver="535.54.03", arch="8.0", brand="tesla")

HOLDS = [
    ("cuda >= equal", "cuda>=12.2", True),
    ("cuda >= newer", "cuda>=12.4", False),
    ("cuda > ", "cuda>12.1", True),
    ("cuda > equal", "cuda>12.2", False),
    ("cuda = padded", "cuda=12.2.0", True),
    ("cuda <=", "cuda<=12.2", True),
    ("cuda <", "cuda<12.2", False),
    ("driver three parts", "driver>=535.54.03", True),
    ("driver newer patch", "driver>=535.54.04", False),
    ("driver major only", "driver<536", True),
    ("arch", "arch>=8.0", True),
    ("arch newer", "arch>=9.0", False),
    ("brand", "brand=Tesla", True),
    ("brand other", "brand=geforce", False),
    ("AND all hold", "cuda>=12.0,driver>=535", True),
    ("AND one fails", "cuda>=12.0,driver>=550", False),
    ("OR second holds", "cuda>=12.4 brand=tesla,driver>=535,driver<536", True),
    ("OR none holds", "cuda>=12.4 brand=geforce,driver>=535", False),
    ("spaces between alternatives", "  cuda>=13.0   cuda>=12.0 ", True),
]


@pytest.mark.parametrize(("raw", "ok"), [h[1:] for h in HOLDS], ids=[h[0] for h in HOLDS])
def test_evaluation(raw: str, ok: bool) -> None:
    assert (unmet(parse("NVIDIA_REQUIRE_CUDA", raw), HOST) is None) is ok


def test_first_failure_of_first_alternative_is_reported() -> None:
    req = parse("NVIDIA_REQUIRE_CUDA", "cuda>=12.4 brand=tesla,driver>=470,driver<471")
    assert unmet(req, HOST) == Condition("cuda", ">=", "12.4")


def test_unknown_facts_do_not_refuse() -> None:
    assert unmet(parse("X", "arch>=9.0"), Facts(cuda="12.2")) is None


BAD = [
    ("unknown key", "gpu>=1"), ("no operator", "cuda12.4"), ("double operator", "cuda>>12"),
    ("brand with >=", "brand>=tesla"), ("not a version", "cuda>=twelve"), ("empty value", "cuda>="),
    ("rocm in env", "rocm>=6.0"), ("empty", "  "),
]


@pytest.mark.parametrize("raw", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_names_source_and_value(raw: str) -> None:
    with pytest.raises(RequestError) as info:
        parse("NVIDIA_REQUIRE_CUDA", raw)
    assert "NVIDIA_REQUIRE_CUDA" in str(info.value) and repr(raw) in str(info.value)


def test_rocm_allowed_in_annotation() -> None:
    (req,) = from_container({}, {"gpuhook.dev/require": "rocm>=6.1"})
    assert req.alternatives == ((Condition("rocm", ">=", "6.1"),),)


SOURCES = [
    ("separate variables all count", {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_ARCH": "arch>=7.0"},
     ["NVIDIA_REQUIRE_ARCH", "NVIDIA_REQUIRE_CUDA"]),
    ("legacy CUDA_VERSION", {"CUDA_VERSION": "11.8.0"}, ["CUDA_VERSION"]),
    ("CUDA_VERSION ignored beside NVIDIA_REQUIRE_CUDA", {"CUDA_VERSION": "11.8.0", "NVIDIA_REQUIRE_CUDA": "cuda>=11.0"},
     ["NVIDIA_REQUIRE_CUDA"]),
    ("disabled", {"NVIDIA_REQUIRE_CUDA": "cuda>=99", "NVIDIA_DISABLE_REQUIRE": "1"}, []),
    ("disable=false keeps them", {"NVIDIA_REQUIRE_CUDA": "cuda>=99", "NVIDIA_DISABLE_REQUIRE": "false"},
     ["NVIDIA_REQUIRE_CUDA"]),
]


@pytest.mark.parametrize(("env", "sources"), [s[1:] for s in SOURCES], ids=[s[0] for s in SOURCES])
def test_sources(env: dict[str, str], sources: list[str]) -> None:
    assert [r.source for r in from_container(env, {})] == sources


def test_legacy_cuda_version_means_at_least_major_minor() -> None:
    (req,) = from_container({"CUDA_VERSION": "12.4.1"}, {})
    assert unmet(req, HOST) == Condition("cuda", ">=", "12.4")
