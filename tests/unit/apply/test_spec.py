from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gpuhook.apply.spec import apply_edits, apply_with, load_spec, rootfs, write_atomic
from gpuhook.apply.spec_edits import SpecContext, lacking
from gpuhook.edits import DeviceNode, DeviceRule, Edits, Mount, ProcOverlay
from gpuhook.errors import SpecError

NODE = DeviceNode(path="/dev/nvidia0", kind="c", major=195, minor=0, mode=0o666, uid=0, gid=0)
EDITS = Edits(device_nodes=(NODE,), device_rules=(DeviceRule("c", 195, 0),),
              mounts=(Mount("/h/libcuda.so.1.2", "/usr/lib/libcuda.so.1.2"),), env=("A=new",),
              additional_gids=(109,), ldcache_dirs=("/usr/lib",))
SPEC = {"ociVersion": "1.0.2", "x-unknown": {"keep": [1, 2]}, "process": {"env": ["A=old", "B=1"],
                                                                           "user": {"uid": 0, "gid": 0}},
        "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}, "mounts": []}


def test_apply_adds_everything_and_keeps_unknown_fields() -> None:
    out = apply_edits(SPEC, EDITS, "/b/rootfs", "/sbin/ldconfig")
    assert out["x-unknown"] == {"keep": [1, 2]}
    assert out["linux"]["devices"] == [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0,
                                        "fileMode": 0o666, "uid": 0, "gid": 0}]
    assert out["linux"]["resources"]["devices"][-1] == {"allow": True, "type": "c", "major": 195, "minor": 0,
                                                        "access": "rwm"}
    assert out["mounts"] == [{"destination": "/usr/lib/libcuda.so.1.2", "type": "bind",
                              "source": "/h/libcuda.so.1.2", "options": ["ro", "nosuid", "nodev", "bind"]}]
    assert out["process"]["env"] == ["B=1", "A=new"]
    assert out["process"]["user"]["additionalGids"] == [109]
    (hook,) = out["hooks"]["createContainer"]  # without the native helper: the Python hook, the same refresh
    assert hook["path"] == "/usr/local/bin/gpuhook" and hook["args"] == [
        "gpuhook", "hook", "update-ldcache", "--folder", "/usr/lib",
        "--mount", "/h/libcuda.so.1.2", "/usr/lib/libcuda.so.1.2"]  # the mounts the native helper is given
    assert all(not e.startswith(("LD_", "PYTHON")) for e in hook["env"]) and hook["timeout"] == 30
    assert SPEC["mounts"] == []  # the input is not mutated


def test_the_native_helper_refreshes_the_cache_with_only_gpuhooks_library_mounts(tmp_path: Path) -> None:
    helper = tmp_path / "gpuhook-createhook"
    helper.write_text("#!/bin/sh\n")
    helper.chmod(0o755)
    edits = Edits(mounts=(Mount("/h/libcuda.so.1.2", "/usr/lib/libcuda.so.1.2"), Mount("/h/smi", "/usr/bin/smi")),
                  ldcache_dirs=("/usr/lib",))
    ctx = SpecContext(root_path="/b/rootfs", ldconfig="/sbin/ldconfig", hook_timeout=7, state_dir="/run/gh",
                      helper=str(helper))
    (hook,) = apply_with(SPEC, edits, ctx)["hooks"]["createContainer"]
    assert hook["path"] == str(helper) and hook["timeout"] == 7
    assert hook["args"] == ["gpuhook-createhook", "/b/rootfs", "--ldcache", "/run/gh/ldcache-root", "/sbin/ldconfig",
                            "1", "/h/libcuda.so.1.2", "/usr/lib/libcuda.so.1.2", "/usr/lib"]
    assert hook["env"] == ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"]
    assert lacking(edits, apply_with(SPEC, edits, ctx)).ldcache_dirs == ()


def test_a_cache_the_shim_wrote_leaves_only_the_procfs_copies_to_the_helper(tmp_path: Path) -> None:
    """The shim wrote the root's linker cache itself (gpu_path/inject.py): no refresh part, no refresh hook."""
    helper = tmp_path / "gpuhook-createhook"
    edits = Edits(mounts=(Mount("/h/libcuda.so.1", "/usr/lib/libcuda.so.1"),), ldcache_dirs=("/usr/lib",),
                  proc_overlays=(ProcOverlay("/run/gh/p1", "/proc/driver/nvidia"),))
    for native in (str(helper), ""):
        ctx = SpecContext(root_path="/b/rootfs", ldconfig="/sbin/ldconfig", state_dir="/run/gh", helper=native,
                          ldcache_written=True)
        hooks = apply_with(SPEC, edits, ctx)["hooks"]["createContainer"]
        assert "--ldcache" not in json.dumps(hooks) and "update-ldcache" not in json.dumps(hooks)
        assert len(hooks) == 1  # the procfs copy's


def test_the_native_helper_is_one_hook_for_every_procfs_copy_and_the_cache(tmp_path: Path) -> None:
    helper = tmp_path / "gpuhook-createhook"
    edits = Edits(mounts=(Mount("/h/libcuda.so.1", "/usr/lib/libcuda.so.1"),), ldcache_dirs=("/usr/lib",),
                  proc_overlays=(ProcOverlay("/run/gh/p1", "/proc/driver/nvidia"),
                                 ProcOverlay("/run/gh/p2", "/proc/driver/nvidia-caps")))
    ctx = SpecContext(root_path="/b/rootfs", ldconfig="/sbin/ldconfig", hook_timeout=7, state_dir="/run/gh",
                      helper=str(helper))
    out = apply_with(SPEC, edits, ctx)
    (hook,) = out["hooks"]["createContainer"]
    assert hook["args"] == ["gpuhook-createhook", "/b/rootfs", "--proc", "/run/gh/p1", "/proc/driver/nvidia",
                            "--proc", "/run/gh/p2", "/proc/driver/nvidia-caps", "--ldcache", "/run/gh/ldcache-root",
                            "/sbin/ldconfig", "1", "/h/libcuda.so.1", "/usr/lib/libcuda.so.1", "/usr/lib"]
    assert lacking(edits, out).proc_overlays == () and lacking(edits, out).ldcache_dirs == ()
    assert apply_with(out, edits, ctx) == out  # idempotent
    more = Edits(proc_overlays=(ProcOverlay("/run/gh/p3", "/proc/driver/amd"),), ldcache_dirs=("/opt/lib",))
    (again, second) = apply_with(out, more, ctx)["hooks"]["createContainer"]
    assert again["args"][8:11] == ["--proc", "/run/gh/p3", "/proc/driver/amd"]  # copies before the refresh
    assert second["args"] == ["gpuhook-createhook", "/b/rootfs", "--ldcache", "/run/gh/ldcache-root",
                              "/sbin/ldconfig", "0", "/opt/lib"]  # a second refresh is its own hook


def test_without_the_helper_each_procfs_copy_is_a_shell_hook() -> None:
    edits = Edits(proc_overlays=(ProcOverlay("/run/gh/p1", "/proc/driver/nvidia"),))
    (hook,) = apply_edits(SPEC, edits, "/b/rootfs", "/sbin/ldconfig")["hooks"]["createContainer"]
    assert hook["path"] == "/bin/sh" and hook["args"][-3:] == ["/b/rootfs", "/run/gh/p1", "/proc/driver/nvidia"]


def test_apply_is_idempotent() -> None:
    once = apply_edits(SPEC, EDITS, "/b/rootfs", "/sbin/ldconfig")
    assert apply_edits(once, EDITS, "/b/rootfs", "/sbin/ldconfig") == once


def test_existing_mount_destination_is_left_alone() -> None:
    spec = {**SPEC, "mounts": [{"destination": "/usr/lib/libcuda.so.1.2", "type": "bind", "source": "/mine"}]}
    out = apply_edits(spec, EDITS, "/b/rootfs", "/sbin/ldconfig")
    assert out["mounts"] == spec["mounts"]


def test_rootfs_relative_to_bundle() -> None:
    assert rootfs({"root": {"path": "rootfs"}}, "/run/b") == "/run/b/rootfs"
    assert rootfs({"root": {"path": "/abs/root"}}, "/run/b") == "/abs/root"


@pytest.mark.parametrize("data", [b"{not json", b"[1,2]", b""], ids=["broken", "array", "empty"])
def test_load_spec_errors(data: bytes) -> None:
    with pytest.raises(SpecError, match=r"config\.json"):
        load_spec(data, "/b/config.json")


def test_write_atomic_keeps_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{}")
    os.chmod(path, 0o600)
    write_atomic(str(path), {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["config.json"]


def test_drop_hooks_takes_only_what_matches() -> None:
    from gpuhook.apply.spec import drop_hooks
    from tests.unit.parsing import is_gpus_hook

    docker = {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
    ours = {"path": "/usr/local/bin/gpuhook", "args": ["gpuhook", "hook", "prestart"]}
    spec = {"hooks": {"prestart": [docker, ours], "poststop": [docker]}}
    drop_hooks(spec, "prestart", is_gpus_hook)
    assert spec == {"hooks": {"prestart": [ours], "poststop": [docker]}}
    alone = {"hooks": {"prestart": [docker]}}
    drop_hooks(alone, "prestart", is_gpus_hook)
    assert alone == {"hooks": {}}
    untouched: dict[str, object] = {}
    drop_hooks(untouched, "prestart", is_gpus_hook)
    assert untouched == {}
