"""The real-node tier: the e2e tier's launchers (gpuhook as install.sh lays it out) and base image, a kubelet built
from tools/components' module set (once per machine), and the tools it needs. The components the selected tests
need are built in the background from collection on (at the lowest priority, beside the tiers that run first),
so that the cluster tier finds them built or half-built."""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import _launchers, base_rootfs  # noqa: F401 (fixtures this tier shares)

from ..conftest import build_in_background, require_for_tier
from .node import KUBERNETES, REPO

_prebuilt: list[bool] = []


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: what is left is what will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    require_for_tier(items, "cluster", ("go", "containerd", "ctr", "unshare", "nsenter", "runc", "cc", "openssl"))
    ours = [i for i in items if "tests/cluster/" in str(i.fspath) and not i.get_closest_marker("skip")]
    if ours and not _prebuilt and not config.option.collectonly:
        versions = sorted({str(i.callspec.params.get("kube_version", KUBERNETES)) for i in ours
                           if hasattr(i, "callspec")} - {KUBERNETES})
        build = f"bash {REPO}/tools/components/build.sh"
        build_in_background(" && ".join([build, *(f"{build} {v}" for v in versions)]),
                            "gpuhook-components-prebuild.log")
        _prebuilt.append(True)


@pytest.fixture(scope="module")
def kube_version() -> str:
    """The Kubernetes version a module's cluster runs (its components: node.components(kube_version)); a module
    may parametrize it (tests/cluster/test_dra_versions.py)."""
    return KUBERNETES


@pytest.fixture(scope="module")
def kube_gates_off() -> tuple[str, ...]:
    """The feature gates a module's cluster leaves at its version's default (control_plane.FEATURE_GATES)."""
    return ()


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """helm's environment: its cache, config and data in a directory of the run's."""
    home = tmp_path_factory.mktemp("helm-home")
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}
