from __future__ import annotations

import os
from pathlib import Path

from gpuhook.apply import procfs_copy
from gpuhook.config import Policy
from gpuhook.host.inventory import Gpu
from gpuhook.host.root import Root
from gpuhook.plan.prepare import ProcfsCopy
from gpuhook.vendors.nvidia import vendor as nvidia

from ...conftest import FakeHost


def test_nvidia_procfs_copy_is_shared_and_only_names_own_gpus(fake_host: FakeHost, tmp_path: Path) -> None:
    root = Root(fake_host(nvidia=2))
    gpu1 = Gpu(vendor="nvidia", index=1, uuid="GPU-1", pci="0000:11:00.0", model="H100", nodes=())
    found = nvidia.procfs_files(root, [gpu1], Policy())
    assert found is not None
    copy = ProcfsCopy("nvidia", found[0], tuple(sorted(found[1].items())))
    first = procfs_copy.write(str(tmp_path), copy).source
    assert procfs_copy.write(str(tmp_path), copy).source == first  # shared by content
    assert os.listdir(f"{first}/nvidia/gpus") == ["0000:11:00.0"]
    params = Path(f"{first}/nvidia/params").read_text()
    assert "ModifyDeviceFiles: 0" in params and "DeviceFileMode: 438" in params
    assert oct(os.stat(f"{first}/nvidia/params").st_mode & 0o777) == "0o444"


def test_a_copy_made_before_content_files_is_still_shared(fake_host: FakeHost, tmp_path: Path) -> None:
    root = Root(fake_host(nvidia=1))
    found = nvidia.procfs_files(root, [Gpu(vendor="nvidia", index=0, uuid="GPU-0", pci="0000:10:00.0", model="H100",
                                           nodes=())], Policy())
    assert found is not None
    copy = ProcfsCopy("nvidia", found[0], tuple(sorted(found[1].items())))
    first = procfs_copy.write(str(tmp_path), copy).source
    os.unlink(first + procfs_copy.CONTENT)  # as an older gpuhook left it
    assert procfs_copy.write(str(tmp_path), copy).source == first
    assert os.path.exists(first + procfs_copy.CONTENT)
    assert sorted(os.listdir(tmp_path / "nvidia-procfs")) == sorted([os.path.basename(first),
                                                                     os.path.basename(first) + ".content"])
