"""gpuhook-runtime in front of real runc: assertions are on what the container sees."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import Result, Run

SEE_NVIDIA = ("for f in /dev/nvidia*; do stat -c 'NODE %n %t:%T' $f; done; nvidia-smi; dlopen-probe libcuda.so.1; "
              "grep -c libcuda.so.1 /etc/ld.so.cache; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; "
              "grep ' /usr/lib/x86_64-linux-gnu/libcuda.so' /proc/self/mountinfo; "
              "cat /sys/fs/cgroup/devices/devices.list; id -u")


def _nodes(out: str) -> dict[str, str]:
    return {parts[1]: parts[2] for line in out.splitlines() if (parts := line.split())[:1] == ["NODE"]}


def test_one_nvidia_gpu_as_unprivileged_user(mixed_host: str, run_container: Run) -> None:
    r = run_container(mixed_host, SEE_NVIDIA, {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"})
    assert r.rc == 0, r.err
    # stat prints major:minor in hex: nvidia1 is 195:1, control nodes as on the host, nvidia0 absent
    assert _nodes(r.out) == {"/dev/nvidia1": "c3:1", "/dev/nvidiactl": "c3:ff", "/dev/nvidia-uvm": "1fd:0",
                             "/dev/nvidia-uvm-tools": "1fd:1"}
    assert "Driver Version: 550.54.15 GPUs: 1" in r.out  # the stub NVML counts the nodes it can see
    assert "dlopen libcuda.so.1 ok cuDriverGetVersion=12040" in r.out
    assert "libcuda.so.550.54.15\n" in r.out  # SONAME link made by the linker-cache refresh
    (mount,) = [line for line in r.out.splitlines() if " /usr/lib/x86_64-linux-gnu/libcuda.so" in line]
    options = mount.split()[5].split(",")
    assert {"ro", "nosuid", "nodev"} <= set(options)
    assert "c 195:1 rwm" in r.out and "c 195:0 rwm" not in r.out and "c 195:255 rwm" in r.out
    assert r.out.strip().endswith("1000")


def test_amd_gpu_nodes_and_groups(mixed_host: str, run_container: Run) -> None:
    r = run_container(mixed_host, "ls /dev/dri; stat -c 'NODE %n %t:%T' /dev/kfd; grep Groups /proc/self/status; "
                      "cat /sys/fs/cgroup/devices/devices.list",
                      {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "amd"})
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[:2] == ["card2", "renderD129"]  # only GPU 1's nodes; card0 (BMC) and card1 (GPU 0) absent
    assert "NODE /dev/kfd 1ff:0" in r.out
    groups = next(line for line in lines if line.startswith("Groups:")).split()[1:]
    assert {"109", "44"} <= set(groups)
    assert "c 226:129 rwm" in r.out and "c 226:2 rwm" in r.out and "c 511:0 rwm" in r.out
    assert "c 226:128 rwm" not in r.out


def test_env_requests(mixed_host: str, run_container: Run) -> None:
    r = run_container(mixed_host, "ls /dev | grep -E '^(nvidia[0-9]|kfd)'; ls /dev/dri",
                      env={"NVIDIA_VISIBLE_DEVICES": "0", "AMD_VISIBLE_DEVICES": "0-1"})
    assert r.rc == 0, r.err
    assert r.out.split() == ["kfd", "nvidia0", "card1", "card2", "renderD128", "renderD129"]


def test_env_requests_off_by_policy(mixed_host: str, run_container: Run, tmp_path: str) -> None:
    r = run_container(mixed_host, "ls /dev", env={"NVIDIA_VISIBLE_DEVICES": "all"},
                      config=f'host_root = "{mixed_host}"\n[policy]\naccept_env_requests = false\n')
    assert r.rc == 0, r.err
    assert "nvidia" not in r.out
    assert r.spec_after == r.spec_before


def test_graphics_capability_gets_graphics_libraries_only(mixed_host: str, run_container: Run) -> None:
    r = run_container(mixed_host, "ls /usr/lib/x86_64-linux-gnu; ls /dev",
                      {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/capabilities": "graphics"})
    assert r.rc == 0, r.err
    assert "libEGL_nvidia.so.0" in r.out and "nvidia-modeset" in r.out
    assert "libcuda" not in r.out and "libnvidia-ml" not in r.out


def test_no_request_passes_through_untouched(mixed_host: str, run_container: Run) -> None:
    r = run_container(mixed_host, "ls /dev; echo done")
    assert r.rc == 0, r.err
    assert "nvidia" not in r.out and "kfd" not in r.out and r.out.strip().endswith("done")
    assert r.spec_after == r.spec_before


def test_readonly_rootfs(mixed_host: str, run_container: Run) -> None:
    def readonly(spec: dict[str, object]) -> None:
        spec["root"] = {"path": "rootfs", "readonly": True}

    r = run_container(mixed_host, "dlopen-probe libcuda.so.1; touch /x || echo rootfs-ro",
                      {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}, spec_edit=readonly)
    assert r.rc == 0, r.err
    assert "dlopen libcuda.so.1 ok" in r.out and "rootfs-ro" in r.out


def test_logs_are_json_lines_with_container_id(mixed_host: str, run_container: Run, tmp_path: str) -> None:
    r = run_container(mixed_host, "true", {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"})
    assert r.rc == 0, r.err
    lines = [json.loads(x) for x in Path(f"{tmp_path}/gpuhook.log").read_text().splitlines()]
    assert lines and all(x["container_id"] == r.cid for x in lines)
    assert any(x["event"] == "injecting" and "/dev/kfd" in x["devices"] for x in lines)


def _assert_refused(r: Result, *needles: str) -> None:
    assert r.rc != 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuhook-runtime: "), r.err
    for needle in needles:
        assert needle in lines[0]
    assert not (r.bundle / "rootfs/ran").exists(), "the container must not have started"
    assert subprocess.run(["runc", "state", r.cid], capture_output=True, check=False).returncode != 0


RAN = "echo yes > /ran"
ERRORS = [
    ("unknown gpu", {"gpuhook.dev/gpus": "7", "gpuhook.dev/vendor": "nvidia"}, ["no NVIDIA GPU 7", "it has: 0"]),
    ("malformed annotation", {"gpuhook.dev/gpus": "first"}, ["gpuhook.dev/gpus='first'"]),
    ("unknown key", {"gpuhook.dev/gpu": "0"}, ["unknown annotation gpuhook.dev/gpu='0'"]),
    ("ambiguous", {"gpuhook.dev/gpus": "0"}, ["ambiguous", "gpuhook.dev/vendor=amd"]),
]


@pytest.mark.parametrize(("annotations", "needles"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_request_errors(mixed_host: str, run_container: Run, annotations: dict[str, str], needles: list[str]) -> None:
    r = run_container(mixed_host, RAN, annotations)
    _assert_refused(r, *needles)
    assert r.spec_after == r.spec_before


def test_missing_driver(fake_host_amd_only: str, run_container: Run) -> None:
    r = run_container(fake_host_amd_only, RAN, env={"NVIDIA_VISIBLE_DEVICES": "all"})
    _assert_refused(r, "NVIDIA_VISIBLE_DEVICES='all'", "asks for NVIDIA GPUs", "1 AMD GPUs")
    assert r.spec_after == r.spec_before


@pytest.fixture
def fake_host_amd_only(fake_host) -> str:  # type: ignore[no-untyped-def]
    return str(fake_host(amd=1))


def test_host_root_missing(run_container: Run, tmp_path: str) -> None:
    r = run_container(f"{tmp_path}/no-such-host", RAN, {"gpuhook.dev/gpus": "0"})
    _assert_refused(r, "host root", "no-such-host")
    assert r.spec_after == r.spec_before


def test_runtime_not_found(mixed_host: str, run_container: Run) -> None:
    r = run_container(mixed_host, RAN, {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"},
                      runtime="no-such-runc")
    _assert_refused(r, "runtime 'no-such-runc' not found")
    assert r.spec_after == r.spec_before


def test_config_json_not_json(mixed_host: str, run_container: Run) -> None:
    def ask(spec: dict[str, object]) -> None:
        spec["annotations"] = {"gpuhook.dev/gpus": "0"}

    r0 = run_container(mixed_host, RAN, spec_edit=ask, runtime="/bin/false")  # only to get a bundle
    path = r0.bundle / "config.json"
    for data in (path.read_bytes()[:-20], b'{"annotations": {"gpuhook.dev/gpus": "0"}, oops}'):
        path.write_bytes(data)
        r = _rerun(r0)
        _assert_refused(r, "config.json", "not valid JSON")
        assert path.read_bytes() == data


def test_config_json_not_json_without_request_is_runcs_to_refuse(mixed_host: str, run_container: Run) -> None:
    r0 = run_container(mixed_host, RAN, runtime="/bin/false")
    path = r0.bundle / "config.json"
    path.write_bytes(b"not json at all")
    r = _rerun(r0)  # pass-through: handed to runc untouched, which refuses it itself
    assert r.rc != 0 and "runc run failed" in r.err and "gpuhook" not in r.err
    assert path.read_bytes() == b"not json at all"
    assert not (r0.bundle / "rootfs/ran").exists()


def test_bundle_without_config_json(mixed_host: str, run_container: Run) -> None:
    r0 = run_container(mixed_host, RAN, runtime="/bin/true")
    os.unlink(r0.bundle / "config.json")
    r = _rerun(r0)
    _assert_refused(r, "has no readable config.json")
    assert not (r0.bundle / "config.json").exists()


def test_runtime_errors_land_in_runc_log_for_containerd(mixed_host: str, run_container: Run, tmp_path: str) -> None:
    r = run_container(mixed_host, RAN, {"gpuhook.dev/gpus": "9", "gpuhook.dev/vendor": "amd"})
    assert r.rc != 0
    (entry,) = [json.loads(x) for x in Path(f"{tmp_path}/{r.cid}.runc.json").read_text().splitlines()]
    assert entry["level"] == "error" and "no AMD GPU 9" in entry["msg"]


def _rerun(previous: Result) -> Result:
    from . import conftest

    cfg = previous.bundle.parent / f"{previous.cid}.toml"
    text = cfg.read_text().replace('runtime = "/bin/false"', 'runtime = "runc"').replace('runtime = "/bin/true"',
                                                                                        'runtime = "runc"')
    cfg.write_text(text)
    proc = subprocess.run([conftest.SHIM, "run", "--bundle", str(previous.bundle), previous.cid],
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(cfg)},
                          capture_output=True, text=True, timeout=60, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr, previous.bundle, b"", previous.cid)
