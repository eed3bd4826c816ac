"""The Kubernetes manifests parse and fit together: the handler containerd gets is the RuntimeClass's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from gpuhook.engines.containerd import edit
from gpuhook.engines.registration import Wanted
from gpuhook.request.container import parse_request

K8S = Path(__file__).parents[2] / "packaging/kubernetes"


def _load(name: str) -> dict:  # type: ignore[type-arg]
    loaded: dict = yaml.safe_load((K8S / name).read_text())  # type: ignore[type-arg]
    return loaded


def test_runtimeclass_names_the_handler_configure_registers() -> None:
    rc = _load("runtimeclass.yaml")
    assert (rc["kind"], rc["metadata"]["name"], rc["handler"]) == ("RuntimeClass", "gpuhook", "gpuhook")
    toml = tomllib.loads(edit("version = 2\n", Wanted("/usr/local/bin/gpuhook-runtime", "/g", "/c")))
    assert rc["handler"] in toml["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]


def test_example_pod_uses_the_runtimeclass_and_valid_annotations() -> None:
    pod = _load("example-pod.yaml")
    assert pod["spec"]["runtimeClassName"] == "gpuhook"
    request = parse_request(pod["metadata"]["annotations"], {})
    assert request.wants_gpus and request.tuning.clocks == (1500, 1500)


def test_daemonset_installs_and_configures_containerd() -> None:
    ds = _load("daemonset.yaml")
    assert ds["kind"] == "DaemonSet"
    script = ds["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "install.sh --configure containerd" in script and "systemctl restart containerd" in script
    assert "gpuhook labels" in script
