from __future__ import annotations

from gpuhook.host.rocm_trees import discover_trees
from gpuhook.host.root import Root

from ...conftest import FakeHost


def test_discover_trees(fake_host: FakeHost) -> None:
    root = Root(fake_host(amd=1, host_rocm=("6.1.2", "6.2.1")))
    trees = discover_trees(root)
    assert [(t.version, t.default, t.lib_dirs) for t in trees] == [("6.1.2", False, ("/opt/rocm-6.1.2/lib",)),
                                                                   ("6.2.1", True, ("/opt/rocm-6.2.1/lib",))]
