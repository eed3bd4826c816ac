"""Host ROCm for slim images, and the hardening every GPU container gets, in real runc (both modes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec, build_host

from . import conftest
from .conftest import Run

MODES = ["shim", "hook"]


@pytest.fixture(scope="module")
def rocm_host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """amdgpu-dkms 6.8.5 (ROCm 6.2: user space 6.0-6.4), ROCm 5.7.1, 6.2.1 and 7.0.0 side by side, 2 NVIDIA."""
    spec = HostSpec(nvidia=2, amd=1, amd_driver="6.8.5", host_rocm=("5.7.1", "6.2.1", "7.0.0"))
    return build_host(str(tmp_path_factory.mktemp("rocm") / "host"), spec)


def _config(host: str, tmp: Path, policy: str = "") -> str:
    return f'host_root = "{host}"\nstate_dir = "{tmp}/state"\nlog_file = "{tmp}/gpuhook.log"\n[policy]\n{policy}'


AMD = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"}
SEE_ROCM = ("echo ROCM_PATH=$ROCM_PATH; /opt/rocm/bin/rocminfo; grep -c libamdhip64.so.6 /etc/ld.so.cache; "
            "grep ' /opt/rocm' /proc/self/mountinfo; touch /opt/rocm/x 2>&1; echo end")


@pytest.mark.parametrize("mode", MODES)
def test_slim_image_gets_the_host_rocm_the_driver_supports(rocm_host: str, run_container: Run, tmp_path: Path,
                                                          mode: str) -> None:
    r = run_container(rocm_host, SEE_ROCM, {**AMD, "gpuhook.dev/host-rocm": "true"},
                      config=_config(rocm_host, tmp_path), mode=mode)
    assert r.rc == 0, r.err
    assert "rocminfo (gpuhook simulated)" in r.out
    mounts = [ln.split() for ln in r.out.splitlines() if " /opt/rocm" in ln and "ext4" in ln]
    assert {m[4] for m in mounts} == {"/opt/rocm-6.2.1", "/opt/rocm"}  # 6.2.1: the newest the driver supports
    assert all(m[3].endswith("/opt/rocm-6.2.1") and "ro" in m[5].split(",") for m in mounts)
    assert "Read-only file system" in r.out
    assert r.out.splitlines()[2] == "1"  # libamdhip64 in the linker cache
    if mode == "shim":
        assert "ROCM_PATH=/opt/rocm-6.2.1" in r.out
    else:  # runc shows a hook's stderr only when it fails: the warning is in the log
        assert "cannot change the container's environment" in (tmp_path / "gpuhook.log").read_text()


def test_named_rocm_version(rocm_host: str, run_container: Run, tmp_path: Path) -> None:
    r = run_container(rocm_host, "echo $ROCM_PATH", {**AMD, "gpuhook.dev/host-rocm": "5.7"},
                      config=_config(rocm_host, tmp_path))
    assert r.rc == 0 and r.out.strip() == "/opt/rocm-5.7.1", r.err


def test_policy_default_host_rocm(rocm_host: str, run_container: Run, tmp_path: Path) -> None:
    cfg = _config(rocm_host, tmp_path, "host_rocm = true\n")
    r = run_container(rocm_host, "echo $ROCM_PATH", AMD, config=cfg)
    assert r.out.strip() == "/opt/rocm-6.2.1", r.err
    r = run_container(rocm_host, "echo ${ROCM_PATH:-none}", {**AMD, "gpuhook.dev/host-rocm": "false"}, config=cfg)
    assert r.out.strip() == "none", r.err


def _image_rocm(version: str):  # type: ignore[no-untyped-def]
    def edit(rootfs: Path) -> None:
        (rootfs / f"opt/rocm-{version}/.info").mkdir(parents=True)
        (rootfs / f"opt/rocm-{version}/.info/version").write_text(version)
        os.symlink(f"rocm-{version}", rootfs / "opt/rocm")
    return edit


def test_image_with_a_different_rocm_is_refused_unless_the_host_wins(rocm_host: str, run_container: Run,
                                                                     tmp_path: Path) -> None:
    r = run_container(rocm_host, "echo yes > /ran", {**AMD, "gpuhook.dev/host-rocm": "true"},
                      config=_config(rocm_host, tmp_path), image_edit=_image_rocm("6.1.0"))
    assert r.rc != 0 and "ships ROCm 6.1.0" in r.err and "host-rocm=6.2.1,override" in r.err
    assert r.spec_after == r.spec_before and not (r.bundle / "rootfs/ran").exists()
    r = run_container(rocm_host, "echo $ROCM_PATH", {**AMD, "gpuhook.dev/host-rocm": "true,override"},
                      config=_config(rocm_host, tmp_path), image_edit=_image_rocm("6.1.0"))
    assert r.rc == 0 and r.out.strip() == "/opt/rocm-6.2.1", r.err


def test_host_rocm_unsupported_by_the_driver(run_container: Run, tmp_path: Path) -> None:
    host = build_host(str(tmp_path / "h"), HostSpec(amd=1, amd_driver="6.8.5", host_rocm=("5.7.1",)))
    r = run_container(host, "true", {**AMD, "gpuhook.dev/host-rocm": "true"}, config=_config(host, tmp_path))
    assert r.rc != 0 and "supports ROCm 6.0 to 6.4 but the host's ROCm trees are 5.7.1" in r.err


@pytest.mark.parametrize("mode", MODES)
def test_nvidia_procfs_copy(rocm_host: str, run_container: Run, tmp_path: Path, mode: str) -> None:
    script = ("cat /proc/driver/nvidia/params; ls /proc/driver/nvidia/gpus; "
              "(echo x >> /proc/driver/nvidia/params) 2>&1; grep ' /proc/driver' /proc/self/mountinfo; echo end")
    r = run_container(rocm_host, script, {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"},
                      config=_config(rocm_host, tmp_path), uid=0, mode=mode)
    assert r.rc == 0, r.err
    assert "ModifyDeviceFiles: 0" in r.out and "ModifyDeviceFiles: 1" not in r.out
    assert "0000:11:00.0" in r.out and "0000:10:00.0" not in r.out  # its own GPU's information only
    assert "can't create /proc/driver/nvidia/params" in r.out  # not writable, even by root in the container
    (mount,) = [ln for ln in r.out.splitlines() if ln.split()[4:5] in (["/proc/driver"], ["/proc/driver/nvidia"])]
    assert {"ro", "nosuid", "nodev", "noexec"} <= set(mount.split()[5].split(","))


def test_hardening_switches_off(rocm_host: str, run_container: Run, tmp_path: Path) -> None:
    cfg = _config(rocm_host, tmp_path, "nvidia_procfs = false\nmask_kfd_proc = false\nreadonly_sys = false\n")
    r = run_container(rocm_host, "ls /proc/driver", {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"},
                      config=cfg, uid=0)
    assert r.rc == 0 and "nvidia" not in r.out, r.err  # this machine's kernel has no NVIDIA procfs of its own


@pytest.mark.parametrize("mode", MODES)
def test_amd_kfd_proc_masked_and_sys_read_only(rocm_host: str, run_container: Run, tmp_path: Path,
                                               mode: str) -> None:
    def writable_sys(spec: dict[str, object]) -> None:
        for m in spec["mounts"]:  # type: ignore[attr-defined]
            if m["destination"] == "/sys":
                m["options"] = ["nosuid", "noexec", "nodev", "rw"]

    r = run_container(rocm_host, "ls /sys/class/kfd/kfd/proc 2>&1; grep ' /sys ' /proc/self/mountinfo",
                      AMD, config=_config(rocm_host, tmp_path), spec_edit=writable_sys, mode=mode, uid=0)
    assert r.rc == 0, r.err
    assert " ro," in next(ln for ln in r.out.splitlines() if " /sys " in ln)  # made read-only again
    assert "No such file or directory" in r.out or r.out.splitlines()[0] == ""  # nothing listed
    if mode == "shim":
        assert "/sys/class/kfd/kfd/proc" in json.loads(r.spec_after)["linux"]["maskedPaths"]


def test_doctor_reports_containers_with_an_old_drivers_libraries(tmp_path: Path, base_rootfs: str) -> None:
    from gpuhook.testing.bundle import make_bundle, oci_config

    host = build_host(str(tmp_path / "h"), HostSpec(nvidia=1, nvidia_driver="535.54.03", cuda_version=12020))
    cfg = tmp_path / "doctor.toml"
    cfg.write_text(_config(host, tmp_path))
    cid = "stale-" + os.urandom(4).hex()
    bundle = tmp_path / "b"
    make_bundle(str(bundle), oci_config(["sleep", "60"], annotations={"gpuhook.dev/gpus": "0"}), base_rootfs)
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(cfg)}
    doctor = [conftest.GPUHOOK, "doctor"]
    try:
        subprocess.run([conftest.SHIM, "run", "-d", "--bundle", str(bundle), cid], env=env, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        ok = subprocess.run(doctor, env=env, capture_output=True, text=True, check=False)
        assert "no running GPU container carries an old driver's libraries" in ok.stdout, ok.stdout
        build_host(host, HostSpec(nvidia=1, nvidia_driver="550.54.15"))  # the host's driver is upgraded
        stale = subprocess.run(doctor, env=env, capture_output=True, text=True, check=False)
        assert stale.returncode >= 1, stale.stdout  # at least a warning, whatever else this host has
        assert (f"container {cid} runs with nvidia driver libraries 535.54.03 but the loaded kernel module is "
                "550.54.15") in stale.stdout and f"restart container {cid}" in stale.stdout
    finally:
        subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False)
        subprocess.run(["runc", "delete", "--force", cid], capture_output=True, check=False)
    gone = subprocess.run(doctor, env=env, capture_output=True, text=True, check=False)
    assert cid not in gone.stdout and "no running GPU container carries" in gone.stdout, gone.stdout
