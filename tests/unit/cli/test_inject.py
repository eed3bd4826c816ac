"""The shim's GPU path as a whole (prepare): what it discovers, and what its errors say."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.config import Config
from gpuhook.errors import PlanError
from gpuhook.gpu_path.inject import Prepared, prepare
from gpuhook.logs import _Discard
from gpuhook.testing.bundle import oci_config

from ...conftest import FakeHost


def _prepare(host: str, tmp_path: Path, annotations: dict[str, str]) -> Prepared:
    (tmp_path / "b" / "rootfs" / "dev").mkdir(parents=True, exist_ok=True)
    config = Config(path="c", host_root=host, state_dir=str(tmp_path / "state"))
    prepared = prepare(oci_config(["true"], annotations=annotations), str(tmp_path / "b"), config, _Discard())
    assert prepared is not None
    return prepared


def test_a_named_vendor_gets_its_gpus_on_a_mixed_host(fake_host: FakeHost, tmp_path: Path) -> None:
    prepared = _prepare(fake_host(nvidia=2, amd=2), tmp_path, {"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": "amd"})
    assert "/dev/kfd" in {n.path for n in prepared.edits.device_nodes}
    assert not [n for n in prepared.edits.device_nodes if "nvidia" in n.path]


@pytest.mark.parametrize(("host", "says"), [({"nvidia": 2}, "the host has 2 NVIDIA GPUs"),
                                             ({}, "no GPU driver")], ids=["nvidia-host", "no-gpus"])
def test_a_missing_vendor_is_reported_with_what_the_host_has(fake_host: FakeHost, tmp_path: Path,
                                                             host: dict[str, int], says: str) -> None:
    with pytest.raises(PlanError, match="asks for AMD GPUs but") as e:
        _prepare(fake_host(**host), tmp_path, {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"})
    assert says in str(e.value)


def test_one_nvml_session_however_many_requirements(fake_host: FakeHost, tmp_path: Path) -> None:
    """Each NVIDIA_REQUIRE_* of the image could have opened its own NVML session; the facts are gathered once."""
    host = fake_host(nvidia=2)
    env = {f"NVIDIA_REQUIRE_R{i}": "arch>=7.0 brand=tesla" for i in range(20)}
    (tmp_path / "b" / "rootfs" / "dev").mkdir(parents=True, exist_ok=True)
    config = Config(path="c", host_root=host, state_dir=str(tmp_path / "state"))
    spec = oci_config(["true"], env=env, annotations={"gpuhook.dev/gpus": "all"})
    assert prepare(spec, str(tmp_path / "b"), config, _Discard()) is not None
    inits = Path(host + "/var/lib/gpuhook-sim/nvml.inits").read_text().splitlines()
    assert inits == ["init"]


def test_a_link_planted_at_the_mps_home_is_not_followed(fake_host: FakeHost, tmp_path: Path) -> None:
    """Issue 43, 8: gpuhook made pipe/ where a link at <mps_dir>/<UUID> pointed and mounted it read-write."""
    from gpuhook.frozen import replace
    from gpuhook.host.root import Root
    from gpuhook.vendors.discover import discover

    host = fake_host(nvidia=1)
    uuid = next(g.uuid for v in discover(Root(host)).vendors for g in v.gpus)
    (tmp_path / "mps").mkdir()
    (tmp_path / "target").mkdir()
    (tmp_path / "mps" / uuid).symlink_to(tmp_path / "target")
    (tmp_path / "b" / "rootfs" / "dev").mkdir(parents=True, exist_ok=True)
    config = Config(path="c", host_root=host, state_dir=str(tmp_path / "state"))
    config = replace(config, tuning=replace(config.tuning, mps_dir=str(tmp_path / "mps")))
    spec = oci_config(["true"], annotations={"gpuhook.dev/gpus": "0", "gpuhook.dev/mps": "true"})
    with pytest.raises(PlanError, match=f"{tmp_path}/mps/{uuid} is a symbolic link or not a directory"):
        prepare(spec, str(tmp_path / "b"), config, _Discard())
    assert list((tmp_path / "target").iterdir()) == []
