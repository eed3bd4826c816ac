"""The processes gpuhook starts per GPU container, counted (#46 item 5), on the product as install.sh installs it.

An engine-like cycle of one GPU container (create, start, a wait for its init as containerd-shim waits, delete),
run by a small harness under `strace -f -e trace=execve`, through gpuhook-runtime with the warm helper serving it,
and on the CDI path: bare runc on a spec with gpuhook's CDI edits applied, as an engine that reads CDI applies
them. Counted: every execve that is not the engine's own work, that is, not the harness (the engine), not runc
(the engine's runtime, wherever it is exec'd), not runc's re-execs of itself (/proc/self/...) and not the
container's own process; listed by path. The container checks that it sees its GPU, so a path that gives it
nothing cannot pass as a cheap one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config
from gpuhook.testing.simulate import HostSpec, build_host

from .conftest import Installs, _Helper

# What gpuhook starts in `create` of one GPU container, by executable name (#46's targets); `start` and `delete`
# pass through gpuhook-runtime to runc on the shim's rows and start nothing on the CDI path's.
EXPECTED: dict[str, Counter[str]] = {
    # the warm shim path: the native front end, which a worker serves, then runc; no ldconfig
    "warm shim, AMD 1 GPU": Counter({"gpuhook-runtime": 1}),
    # NVIDIA: the createContainer hook stays for the procfs copy (runc refuses spec mounts inside /proc)
    "warm shim, NVIDIA 1 GPU": Counter({"gpuhook-runtime": 1, "gpuhook-createhook": 1}),
    "warm shim, NVIDIA 1 GPU, nvidia_procfs = false": Counter({"gpuhook-runtime": 1}),
    # the CDI path: the engine applies the spec and runs runc; AMD's spec has no hook
    "CDI, AMD 1 GPU": Counter(),
    # NVIDIA's spec: its hook, one process (#46 asks 0; whether that hook remains is decided elsewhere)
    "CDI, NVIDIA 1 GPU": Counter({"<the spec's hook>": 1}),
}
SPEC_HOOK = "<the spec's hook>"  # stands for the executable the CDI spec's hook names

MARKER = "gpuhook-counted-container"  # the container process's $0: how its execve is told apart
STEP = "/gpuhook-count-step/"  # the harness's failed execve of STEP + name marks where each step begins
SEES = {"nvidia": "test -c /dev/nvidia0 && ! test -e /dev/nvidia1",
        "amd": "test -c /dev/kfd && test -c /dev/dri/renderD128 && ! test -e /dev/dri/renderD129"}
# the engine: a child subreaper that runs the runtime for each step (failed execve of STEP + name first), waits
# for the container's init and fails unless it exited 0
HARNESS = f"""
import ctypes, os, subprocess, sys
runtime, bundle, cid, pid_file = sys.argv[1:]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
def step(name, *args):
    try:
        os.execv("{STEP}" + name, ["step"])
    except OSError:
        pass
    subprocess.run([runtime, *args], check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
step("create", "create", "--bundle", bundle, "--pid-file", pid_file, cid)
step("start", "start", cid)
_, status = os.waitpid(int(open(pid_file).read()), 0)
step("delete", "delete", cid)
sys.exit(os.waitstatus_to_exitcode(status))
"""


class Site:
    """The native installation, a simulated host, its configs, the warm helper on a private socket."""

    def __init__(self, bindir: Path, tmp: Path) -> None:
        self.bindir, self.tmp = bindir, tmp
        self.host = build_host(str(tmp / "host"), HostSpec(nvidia=2, amd=2))
        self.rootfs = tmp / "rootfs"
        make_rootfs(str(self.rootfs))
        self.sock = tmp / "run" / "warm.sock"
        self.configs = {procfs: self._config(f"config-{procfs}", procfs) for procfs in (True, False)}

    def _config(self, name: str, procfs: bool) -> Path:
        path = self.tmp / f"{name}.toml"
        path.write_text(f'host_root = "{self.host}"\nruntime = "runc"\nstate_dir = "{self.tmp}/state-{name}"\n'
                        f"[policy]\nnvidia_procfs = {'true' if procfs else 'false'}\n")
        return path

    def env(self, config: Path) -> dict[str, str]:
        return {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config), "GPUHOOK_WARM_SOCKET": str(self.sock)}

    def cdi_spec(self, vendor: str) -> dict[str, Any]:
        """gpuhook's CDI spec of the host for `vendor`, as `gpuhook cdi generate` writes it."""
        out = self.tmp / f"cdi-{vendor}.json"
        done = subprocess.run([str(self.bindir / "gpuhook"), "cdi", "generate", "--vendor", vendor, "--output",
                               str(out)], env=self.env(self.configs[True]), capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        loaded: dict[str, Any] = json.loads(out.read_text())
        return loaded


@pytest.fixture(scope="module")
def site(installs: Installs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    bindir = installs["native"][0]
    made = Site(bindir, tmp_path_factory.mktemp("counts"))
    helper = _Helper([str(bindir / "gpuhook")], made.sock, made.tmp / "warm.out")
    try:
        yield made
    finally:
        helper.stop()


def apply_cdi(spec: dict[str, Any], cdi: dict[str, Any], device: str, hook_env: list[str]) -> None:
    """`cdi`'s edits for `device` (the spec-wide ones and the device's) applied to the OCI `spec` as an engine
    applies them: env, device nodes (with their cgroup rules), mounts and hooks (`hook_env` added to each hook's
    env). Changes `spec`."""
    (named,) = (d for d in cdi["devices"] if d["name"] == device)
    linux = spec["linux"]
    for edits in (cdi.get("containerEdits") or {}, named["containerEdits"]):
        spec["process"]["env"] += edits.get("env") or []
        for node in edits.get("deviceNodes") or []:
            host = node.get("hostPath", node["path"])
            rdev = os.stat(host).st_rdev
            major, minor = node.get("major", os.major(rdev)), node.get("minor", os.minor(rdev))
            kind = node.get("type", "c")
            linux.setdefault("devices", []).append(
                {"path": node["path"], "type": kind, "major": major, "minor": minor,
                 **{k: node[k] for k in ("fileMode", "uid", "gid") if k in node}})
            linux["resources"]["devices"].append({"allow": True, "type": kind, "major": major, "minor": minor,
                                                  "access": node.get("permissions", "rwm")})
        for mount in edits.get("mounts") or []:
            spec["mounts"].append({"destination": mount["containerPath"], "source": mount["hostPath"],
                                   "type": mount.get("type", "bind"), "options": mount.get("options", ["bind"])})
        for hook in edits.get("hooks") or []:
            entry = {k: hook[k] for k in ("path", "args", "env", "timeout") if k in hook}
            entry["env"] = [*entry.get("env", []), *hook_env]
            spec.setdefault("hooks", {}).setdefault(hook["hookName"], []).append(entry)


def _execs(trace: str) -> list[tuple[str, str, bool]]:
    """(pid, path, succeeded) of each execve in strace's record, in order, an interrupted call ("<unfinished
    ...>", then "<... execve resumed>") taken where it ends."""
    pending: dict[str, str] = {}
    out = []
    for line in trace.splitlines():
        pid, _, rest = line.partition(" ")
        rest = rest.lstrip()  # strace pads short pids
        if rest.startswith("execve("):
            call = rest
        elif rest.startswith("<... execve resumed>") and pid in pending:
            call = pending.pop(pid) + rest
        else:
            continue
        if call.rstrip().endswith("<unfinished ...>"):
            pending[pid] = call.removesuffix("<unfinished ...>")
            continue
        path = call.split('execve("', 1)[1].split('"', 1)[0]
        out.append((pid, path, call.rstrip().endswith("= 0") and MARKER not in call))
    return out


def count(trace: str) -> dict[str, list[str]]:
    """The paths gpuhook's side started in each step (create, start, delete): every successful execve but the
    harness's own, runc's (by name), runc's re-execs of itself (/proc/...) and the container's process."""
    execs = _execs(trace)
    harness = execs[0][0]
    steps: dict[str, list[str]] = {}
    step = ""
    for pid, path, ok in execs:
        if path.startswith(STEP):
            step = path.removeprefix(STEP)
            steps[step] = []
        elif ok and step and pid != harness and os.path.basename(path) != "runc" and not path.startswith("/proc/"):
            steps[step].append(path)
    return steps


def cycle(site: Site, row: str, vendor: str) -> dict[str, list[str]]:
    """One container of `row` through its path, traced; what gpuhook's side started, by step."""
    cid = f"count-{uuid.uuid4().hex[:10]}"
    bundle = site.tmp / cid
    spec = oci_config(["sh", "-c", SEES[vendor], MARKER])
    if row.startswith("CDI"):  # the helper, at its default socket on a host, is on a private one here
        apply_cdi(spec, site.cdi_spec(vendor), "0", [f"GPUHOOK_WARM_SOCKET={site.sock}"])
        runtime, env = shutil.which("runc") or "runc", {"PATH": os.environ["PATH"]}
    else:
        spec["annotations"] = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor}
        runtime = str(site.bindir / "gpuhook-runtime")
        env = site.env(site.configs["nvidia_procfs = false" not in row])
    make_bundle(str(bundle), spec, str(site.rootfs))
    trace = site.tmp / f"{cid}.trace"
    done = subprocess.run(["strace", "-f", "-qq", "-s", "256", "-e", "trace=execve", "-e", "signal=none", "-o",
                           str(trace), "/usr/bin/python3", "-I", "-S", "-c", HARNESS, runtime, str(bundle), cid,
                           str(site.tmp / f"{cid}.pid")], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    subprocess.run(["runc", "delete", "-f", cid], capture_output=True, check=False)
    assert done.returncode == 0, f"{row}: the cycle failed or the container did not see its GPU:\n{done.stderr}"
    return count(trace.read_text())


@pytest.mark.parametrize("row", list(EXPECTED))
def test_processes_gpuhook_starts_per_gpu_container(site: Site, row: str) -> None:
    vendor = "amd" if "AMD" in row else "nvidia"
    started = cycle(site, row, vendor)
    seen = {step: Counter(os.path.basename(p) for p in paths) for step, paths in started.items()}
    through = Counter({"gpuhook-runtime": 1}) if row.startswith("warm shim") else Counter()
    hooks = [h["path"] for h in site.cdi_spec(vendor).get("containerEdits", {}).get("hooks") or []]
    expected = Counter({os.path.basename(hooks[0]) if k == SPEC_HOOK and len(hooks) == 1 else k: n
                        for k, n in EXPECTED[row].items()})
    assert seen == {"create": expected, "start": through, "delete": through}, f"{row}: started {started}"
    assert not any(os.path.basename(p).startswith("ldconfig") for paths in started.values() for p in paths), started
