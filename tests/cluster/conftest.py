"""The real-node tier: the e2e tier's launchers (gpuhook as install.sh lays it out) and base image, a kubelet built
from tools/components' module set (once per machine), and the tools it needs."""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import _launchers, base_rootfs  # noqa: F401 (fixtures this tier shares)

from ..conftest import require_for_tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    require_for_tier(items, "cluster", ("go", "containerd", "ctr", "unshare", "nsenter", "runc", "cc", "openssl"))


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """helm's environment: its cache, config and data in a directory of the run's."""
    home = tmp_path_factory.mktemp("helm-home")
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}
