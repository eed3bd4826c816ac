from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from gpuhook.apply.cdi import CdiError, build, to_yaml
from gpuhook.host.root import Root
from gpuhook.vendors.amd import vendor as amd
from gpuhook.vendors.discover import discover
from gpuhook.vendors.nvidia import vendor as nvidia

FakeHost = Callable[..., str]
CAPS = frozenset({"compute", "utility"})


def test_nvidia_spec(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=2)
    spec, warnings = build(nvidia, discover(Root(host)).vendor("nvidia"), host, CAPS, "/usr/local/bin/gpuhook",  # type: ignore[arg-type]
                           "/etc/gpuhook/config.toml")
    assert warnings == [] and spec["cdiVersion"] == "0.5.0" and spec["kind"] == "nvidia.com/gpu"
    names = [d["name"] for d in spec["devices"]]
    assert names[:2] == ["0", "1"] and names[-1] == "all" and names[2].startswith("GPU-")
    (node,) = spec["devices"][1]["containerEdits"]["deviceNodes"]
    assert (node["path"], node["hostPath"], node["major"], node["minor"]) == ("/dev/nvidia1", f"{host}/dev/nvidia1",
                                                                             195, 1)
    common = spec["containerEdits"]
    assert {n["path"] for n in common["deviceNodes"]} == {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}
    assert any(m["containerPath"].endswith("libcuda.so.550.54.15") and "ro" in m["options"] for m in common["mounts"])
    (hook,) = common["hooks"]
    assert hook["hookName"] == "createRuntime" and hook["args"][:3] == ["gpuhook", "hook", "update-ldcache"]
    assert "--folder" in hook["args"] and common["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]


def test_the_linker_cache_hook_is_the_native_one_where_built(fake_host: FakeHost) -> None:
    """With gpuhook-hook installed, the spec's cache is written by one createRuntime call of that front end (in the
    runtime's namespaces, where the warm helper serves it), told the driver files' mounts; no ldconfig."""
    host = fake_host(nvidia=1)
    spec, _ = build(nvidia, discover(Root(host)).vendor("nvidia"), host, CAPS, "/opt/g/bin/gpuhook",  # type: ignore[arg-type]
                    "/etc/gpuhook/config.toml", helper="/opt/g/bin/gpuhook-hook", state_dir="/run/gh")
    (hook,) = spec["containerEdits"]["hooks"]
    assert hook["path"] == "/opt/g/bin/gpuhook-hook" and hook["hookName"] == "createRuntime"
    assert hook["args"][:3] == ["gpuhook", "hook", "update-ldcache"] and "ldconfig" not in " ".join(hook["args"])
    mounts = [hook["args"][i + 1:i + 3] for i, a in enumerate(hook["args"]) if a == "--mount"]
    assert mounts and all(m[0].endswith(".so.550.54.15") for m in mounts)  # each driver library, host and container
    assert "--folder" in hook["args"] and hook["env"] == ["GPUHOOK_CONFIG=/etc/gpuhook/config.toml"]


def test_amd_spec_needs_0_7_for_groups_and_an_older_target_drops_them(fake_host: FakeHost) -> None:
    host = fake_host(amd=2)
    inv = discover(Root(host)).vendor("amd")
    spec, _ = build(amd, inv, host, CAPS, "/g", "/c")  # type: ignore[arg-type]
    assert spec["cdiVersion"] == "0.7.0" and spec["containerEdits"]["additionalGids"] == [109, 44]
    assert [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]] == ["/dev/dri/renderD128",
                                                                                        "/dev/dri/card1"]
    old, warnings = build(amd, inv, host, CAPS, "/g", "/c", "0.5.0")  # type: ignore[arg-type]
    assert old["cdiVersion"] == "0.5.0" and "additionalGids" not in old["containerEdits"]
    assert "dropped [109, 44]" in warnings[0]
    with pytest.raises(CdiError, match=r"0\.5\.0 is the oldest"):
        build(amd, inv, host, CAPS, "/g", "/c", "0.4.0")  # type: ignore[arg-type]


def test_no_gpus_no_spec(fake_host: FakeHost) -> None:
    host = fake_host(drivers_without_gpus=("amd",))
    with pytest.raises(CdiError, match="lists no GPUs"):
        build(amd, discover(Root(host)).vendor("amd"), host, CAPS, "/g", "/c")  # type: ignore[arg-type]


def test_yaml_is_block_style_with_json_scalars() -> None:
    text = to_yaml({"a": "x", "b": [{"c": 1, "d": ["e"]}], "f": [], "g": {"h": True}})
    assert text == 'a: "x"\nb:\n  - c: 1\n    d:\n      - "e"\nf: []\ng:\n  h: true'
    assert json.loads(to_yaml("he said \"hi\"")) == 'he said "hi"'


def test_the_installed_consumers_cap_the_version_and_the_warning_says_what_to_add(fake_host: FakeHost) -> None:
    from gpuhook.engines.table import reader

    host = fake_host(amd=2)
    inv = discover(Root(host)).vendor("amd")
    debian = (reader("podman", "4.3.1"), reader("containerd", "1.6.20"), reader("docker", "20.10.24"))
    spec, warnings = build(amd, inv, host, CAPS, "/g", "/c", readers=debian)  # type: ignore[arg-type]
    assert spec["cdiVersion"] == "0.5.0" and "additionalGids" not in spec["containerEdits"]
    (warning,) = warnings
    assert "the highest Podman 4.3.1 parses" in warning and "--group-add 109 --group-add 44" in warning
    assert "supplementalGroups: [109, 44]" in warning and "permissions stay as they are" in warning
    assert "rootless Podman" in warning and "--group-add keep-groups with crun" in warning  # tests/e2e/test_rootless
    # all of them parse 0.7.0: nothing is dropped, and nothing higher than the fields need is written
    spec, warnings = build(amd, inv, host, CAPS, "/g", "/c", readers=(reader("podman", "5.8.1"),))  # type: ignore[arg-type]
    assert (spec["cdiVersion"], warnings) == ("0.7.0", []) and spec["containerEdits"]["additionalGids"] == [109, 44]
    # --cdi-version wins, and the consumer that cannot read it is named
    spec, warnings = build(amd, inv, host, CAPS, "/g", "/c", "0.7.0", readers=debian)  # type: ignore[arg-type]
    assert spec["cdiVersion"] == "0.7.0" and warnings == ["Podman 4.3.1 cannot parse cdiVersion 0.7.0 (it knows up "
                                                          "to 0.5.0)"]
    with pytest.raises(CdiError, match=r"highest Podman 4\.2\.0 parses cannot carry hostPath.*upgrade Podman"):
        build(amd, inv, host, CAPS, "/g", "/c", readers=(reader("podman", "4.2.0"),))  # type: ignore[arg-type]


def test_a_spec_goes_stale_when_the_driver_changes(fake_host: FakeHost) -> None:
    from gpuhook.apply.cdi import is_ours, stale
    from gpuhook.testing.simulate import HostSpec, build_host

    host = fake_host(nvidia=2, nvidia_driver="535.54.03")
    spec, _ = build(nvidia, discover(Root(host)).vendor("nvidia"), host, CAPS, "/g", "/c")  # type: ignore[arg-type]
    assert is_ours(spec, nvidia) and not is_ours(spec, amd) and not is_ours({"kind": "nvidia.com/gpu"}, nvidia)
    assert stale(spec, nvidia, discover(Root(host)).vendor("nvidia"), host) == []
    build_host(host, HostSpec(nvidia=1, nvidia_driver="550.54.15"))  # the driver upgraded, and a GPU went
    reasons = stale(spec, nvidia, discover(Root(host)).vendor("nvidia"), host)
    assert "files the loaded NVIDIA driver 550.54.15 does not have (libcuda.so.535.54.03" in reasons[0]
    assert reasons[1] == "its device nodes are not the host's: /dev/nvidia1"
    assert reasons[2].startswith("it lists 4 devices where the host has 2 GPU names (gone: 1, GPU-")
    assert stale(spec, nvidia, None, host) == ["it describes NVIDIA GPUs but no NVIDIA driver is loaded"]
