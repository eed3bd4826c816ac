from __future__ import annotations

from collections.abc import Callable

from gpuhook.host.discover import discover
from gpuhook.host.labels import labels, render
from gpuhook.host.root import Root

FakeHost = Callable[..., str]


def test_mixed_node(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=2, amd=3, nvidia_driver="535.54.03", cuda_version=12020, amd_driver="6.8.5"))
    assert labels(discover(root), root) == {
        "gpuhook-nvidia.present": "true", "gpuhook-nvidia.count": "2", "gpuhook-nvidia.driver": "535.54.03",
        "gpuhook-nvidia.cuda": "12.2",  # asked of the host's own libcuda
        "gpuhook-amd.present": "true", "gpuhook-amd.count": "3", "gpuhook-amd.driver": "6.8.5",
        "gpuhook-amd.rocm": "6.2", "gpuhook-amd.gfx": "gfx942"}


def test_in_tree_amd_and_file_format(fake_host: FakeHost) -> None:
    root = Root(fake_host(amd=1, amd_driver=None))
    text = render(labels(discover(root), root))
    assert "gpuhook-amd.in-tree=true\n" in text and "rocm" not in text
    assert all(line.count("=") == 1 for line in text.splitlines())


def test_no_gpu_node(fake_host: FakeHost) -> None:
    root = Root(fake_host())
    assert labels(discover(root), root) == {}
