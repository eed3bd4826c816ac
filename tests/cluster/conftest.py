"""The real-node tier: the e2e tier's launchers (gpuhook as install.sh lays it out) and base image, a kubelet built
from tools/components' module set (once per machine), and the tools it needs."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import _launchers, base_rootfs  # noqa: F401 (fixtures this tier shares)

from ..conftest import require_for_tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    require_for_tier(items, "cluster", ("go", "containerd", "ctr", "unshare", "nsenter", "runc", "cc", "openssl"))
