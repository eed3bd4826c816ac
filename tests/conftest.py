"""Shared fixtures: fake GPU hosts built by the real simulator, and a cached stub compiler dir."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
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


_TIERS = {"unit": "unit tests (pure, fake hosts)", "e2e": "end-to-end tests (real runc, crun, dockerd, containerd, "
          "Podman, Prometheus)", "installed": "the installed product (install.sh, --no-native, the warm helper, "
          "the .deb and .rpm of the self-contained build, on Debian 11 and 13 roots, arm64 under qemu; a first run "
          "builds every release artifact and the roots)", "cluster": "a one-node Kubernetes cluster (etcd, API "
          "server, scheduler, controller-manager, kubelet, containerd 1.6 and 2, CRI-O, helm, NVIDIA's "
          "container toolkit: built from tools/components' modules once per machine; gpuhook's plugin and its "
          "DaemonSet)"}
_tier = {"now": "", "started": 0.0}


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Say when a tier starts (tests/run.sh's progress): its name, and the seconds since the session began."""
    import time

    parts = nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    if tier in _TIERS and tier != _tier["now"]:
        if not _tier["started"]:
            _tier["started"] = time.monotonic()
        _tier["now"] = tier
        import sys

        sys.stderr.write(f"\n[{time.monotonic() - _tier['started']:.0f}s] {_TIERS[tier]}\n")
        sys.stderr.flush()


def require_for_tier(items: list[pytest.Item], tier: str, tools: tuple[str, ...]) -> None:
    """Skip the tier's items without root or `tools` (CI: a usage error instead: it must run them, not skip them)."""
    import shutil

    missing = [t for t in tools if shutil.which(t) is None]
    if os.geteuid() == 0 and not missing:
        return
    why = f"tests/{tier} needs root and {', '.join(missing) or tools[0]}"
    if os.environ.get("CI"):
        raise pytest.UsageError(f"{why}: CI must run these tests, not skip them")
    for item in items:
        if f"tests/{tier}/" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason=why))


_background: list[subprocess.Popen[bytes]] = []


def build_in_background(script: str, log: str) -> None:
    """Run `script` (bash) at the lowest priority beside the tiers, its output in the temporary directory's `log`:
    components a tier needs later, built meanwhile (stopped at the session's end: what it finished stays cached)."""
    with open(os.path.join(tempfile.gettempdir(), log), "wb") as out:
        _background.append(subprocess.Popen(["nice", "-n", "19", "bash", "-c", script], stdout=out,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True))


def pytest_sessionfinish() -> None:
    """The background builds, stopped if they are still going."""
    for proc in _background:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
