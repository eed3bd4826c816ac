"""Shared fixtures: fake GPU hosts built by the real simulator, and a cached stub compiler dir."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec, build_host


@pytest.fixture(scope="session", autouse=True)
def _stub_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("GPUHOOK_STUB_CACHE")
    os.environ["GPUHOOK_STUB_CACHE"] = str(tmp_path_factory.mktemp("stubs"))
    yield
    if old is None:
        os.environ.pop("GPUHOOK_STUB_CACHE", None)
    else:
        os.environ["GPUHOOK_STUB_CACHE"] = old


FakeHost = Callable[..., str]


@pytest.fixture
def fake_host(tmp_path: Path) -> FakeHost:
    """Build a simulated host under tmp_path: fake_host(nvidia=2, amd=1, amd_driver=None, ...)."""
    count = iter(range(1000))

    def build(**kwargs: object) -> str:
        return build_host(str(tmp_path / f"host{next(count)}"), HostSpec(**kwargs))  # type: ignore[arg-type]

    return build
