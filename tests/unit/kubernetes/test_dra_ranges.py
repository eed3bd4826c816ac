"""#45 item 2 at NodePrepareResources: a claim's GpuConfig value the GPU cannot take (its supported clocks, power
limits, fan speeds) fails the preparation with gpuhook's one line, which the kubelet puts in the pod's events, and
leaves nothing prepared (no CDI spec, no record in state_dir or the checkpoint); a value inside is prepared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhook.apply import claims
from gpuhook.config import from_table
from gpuhook.errors import KubernetesError
from gpuhook.host.root import Root
from gpuhook.kubernetes.dra.config import API_VERSION, KIND
from gpuhook.kubernetes.dra.state import Preparer
from gpuhook.kubernetes.dra.taints import Xids, describe
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.discover import discover, identified

DRIVER = "gpu.gpuhook.dev"


class _Api:
    """The API server as the preparer reads it: one claim."""

    def __init__(self, claim: dict[str, Any]) -> None:
        self.claim = claim

    def get(self, path: str) -> dict[str, Any]:
        assert path.endswith("/resourceclaims/c1"), path
        return self.claim


def _claim(device: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"uid": "uid-1"}, "status": {
        "allocation": {"devices": {
            "results": [{"driver": DRIVER, "pool": "node-1", "device": device, "request": "gpu"}],
            "config": [{"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
                "apiVersion": API_VERSION, "kind": KIND, **params}}}]}},
        "reservedFor": [{"resource": "pods", "uid": "pod-1"}]}}


CASES = [
    ("nvidia clocks", HostSpec(nvidia=1), {"clocks": "9999"},
     "claim team-a/c1, request gpu: GPU 0 (GPU-00000000-5a1e-4000-8000-0000d00d0000) locks its graphics clock within "
     "345-1980 MHz: 9999 MHz refused"),
    ("nvidia power", HostSpec(nvidia=1), {"powerLimit": 5000}, "takes a power limit of 100-700 W: 5000 W refused"),
    ("nvidia fan", HostSpec(nvidia=1), {"fan": 20}, "runs its fans at 30-100%: 20% refused"),
    ("nvidia fanless", HostSpec(nvidia=1, fans=0), {"fan": "auto"}, "has no fan"),
    ("amd clocks", HostSpec(amd=1, amdsmi=False), {"clocks": "9999"},
     "claim team-a/c1, request gpu: GPU 0 (0000:80:00.0) runs its graphics clock within 500-2100 MHz: 9999 MHz "
     "refused"),
    ("amd power", HostSpec(amd=1, amdsmi=True), {"powerLimit": "5000W"},
     "takes a power cap of 100-750 W (amd-smi): 5000 W refused"),
    ("amd fan", HostSpec(amd=1, amdsmi=False), {"fan": "10%"}, "runs its fan at 20-100%"),
    ("nvidia inside", HostSpec(nvidia=1), {"clocks": "1500", "powerLimit": 300, "fan": 30}, ""),
    ("amd inside", HostSpec(amd=1, amdsmi=False), {"clocks": "1200-1700", "powerLimit": 100, "fan": 20}, ""),
]


@pytest.mark.parametrize(("spec", "params", "said"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_the_gpu_cannot_take_fails_the_preparation(tmp_path: Path, spec: HostSpec, params: dict[str, Any],
                                                           said: str) -> None:
    host = build_host(str(tmp_path / "host"), spec)
    config = from_table({"host_root": host, "state_dir": str(tmp_path / "state")}, str(tmp_path / "config.toml"))
    root = Root(host)
    inventory = identified(root, discover(root))
    devices = [d for d, _ in describe(inventory, root, Xids(), {})]
    d = devices[0]
    checkpoint = str(tmp_path / "plugins" / DRIVER)
    preparer = Preparer(config, _Api(_claim(d.name, params)), DRIVER, "node-1",  # type: ignore[arg-type]
                        str(tmp_path / "cdi"), "/bin/gpuhook-hook", "/bin/gpuhook", checkpoint=checkpoint)
    before = {p: p.read_bytes() for p in Path(host, "sys/devices").rglob("*") if p.is_file()}
    if not said:
        assert preparer.prepare("team-a", "uid-1", "c1", {d.name: d}, inventory)
        assert Path(preparer.spec_path("uid-1")).exists()
        return
    with pytest.raises(KubernetesError) as e:
        preparer.prepare("team-a", "uid-1", "c1", {d.name: d}, inventory)
    assert str(e.value).startswith("claim team-a/c1, request gpu: ") and said in str(e.value), e.value
    assert "\n" not in str(e.value)
    assert not Path(preparer.spec_path("uid-1")).exists()  # nothing prepared: no CDI spec, no record
    assert claims.load(config.state_dir, "uid-1") is None and claims.load(checkpoint, "uid-1") is None
    assert {p: p.read_bytes() for p in Path(host, "sys/devices").rglob("*") if p.is_file()} == before
