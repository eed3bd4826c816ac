"""Who the warm helper serves. It runs calls as root with every capability, so it serves only a caller that is what
an engine's call to the runtime (or a runtime's hook) is: in the helper's own mount, pid and user namespaces, at its
root, with all its capabilities, naming a config only root can write. One static caller (clients/warm_call.c)
makes the same harmless call (`gpuhook hook poststop`) from the host, where it is served, and from every shape of
container and namespace an attacker has, where it must get "direct" (or not reach the socket at all). Before this
rule, a container's root that could see the socket and a read-only view of the host was served in the container's
own mount namespace, importing code from the image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuhook.cli.launcher import write_launchers
from gpuhook.testing.bundle import make_bundle, oci_config

from .conftest import HOOK_DIR
from .test_warm import Daemon

CLIENT = Path(__file__).parent / "clients/warm_call.c"
DOCKER_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
               "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
               "CAP_AUDIT_WRITE"]  # Docker's default capabilities
ALL_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
            "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
            "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
            "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
            "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
            "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN",
            "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
            "CAP_CHECKPOINT_RESTORE")  # every capability runc knows, in bit order


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Path]]:
    """The warm helper from launchers of this checkout, on a socket in its own directory; the static caller and a
    root-owned config, in a world-readable directory (a chroot into the host's view reaches them)."""
    work = tmp_path_factory.mktemp("callers")
    os.chmod(work, 0o755)
    bindir = work / "bin"
    bindir.mkdir()
    write_launchers(str(bindir), sys.executable, [HOOK_DIR, sysconfig.get_paths()["purelib"]])
    client = work / "warm_call"
    subprocess.run(["cc", "-static", "-O2", "-o", str(client), str(CLIENT)], check=True)
    (work / "config.toml").write_text(f'host_root = "/"\nstate_dir = "{work}/state"\n')
    (work / "state.json").write_text(json.dumps({"ociVersion": "1.0.2", "id": "warm-caller", "status": "stopped"}))
    os.chmod(work / "state.json", 0o644)
    daemon = Daemon(bindir, work / "run" / "warm.sock", work / "daemon.out")
    yield daemon, work
    daemon.stop()


def _call_argv(sock: str, work: Path, config: Path | None = None) -> list[str]:
    """The caller's command line: a poststop hook call (harmless: nothing to restore) naming `config`."""
    return [str(work / "warm_call"), sock, "hook", str(work / "state.json"), "/usr/local/bin/gpuhook", "3",
            "gpuhook", "hook", "poststop", f"GPUHOOK_CONFIG={config or work / 'config.toml'}", "PATH=/usr/bin:/bin"]


def _host(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    return done.stdout.strip() + done.stderr.strip()


def test_the_host_caller_is_served(helper: tuple[Daemon, Path]) -> None:
    """The control: the same call from the host is run by a worker (so every "direct" below is a refusal)."""
    daemon, work = helper
    assert _host(_call_argv(str(daemon.sock), work)) == "exit 0"


@pytest.mark.parametrize("wrap", [
    ["unshare", "-p", "-f"],
    ["unshare", "-m"],
    ["unshare", "-U", "-r"],
    ["setpriv", "--bounding-set", "-sys_admin"],
    ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all"],
], ids=["other pid namespace", "other mount namespace", "user namespace as root", "without CAP_SYS_ADMIN",
        "no capabilities"])
def test_a_host_caller_in_another_namespace_or_with_fewer_capabilities_is_not_served(
        helper: tuple[Daemon, Path], wrap: list[str]) -> None:
    daemon, work = helper
    assert _host([*wrap, *_call_argv(str(daemon.sock), work)]) == "direct"


def test_a_config_others_may_write_is_not_used(helper: tuple[Daemon, Path], tmp_path: Path) -> None:
    daemon, work = helper
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "/"\nstate_dir = "{work}/state"\n')
    os.chmod(config, 0o666)
    assert _host(_call_argv(str(daemon.sock), work, config)) == "direct"
    os.chmod(config, 0o644)
    assert _host(_call_argv(str(daemon.sock), work, config)) == "exit 0"


Edit = Callable[[dict[str, Any], Path], list[str]]


def _docker_root(spec: dict[str, Any], work: Path) -> list[str]:
    spec["process"]["capabilities"] = {k: list(DOCKER_CAPS) for k in ("bounding", "effective", "permitted")}
    return _call_argv("/run/warm/warm.sock", Path("/w"))


def _all_caps_host_pid(spec: dict[str, Any], work: Path) -> list[str]:
    bounding = int(next(ln for ln in Path("/proc/self/status").read_text().splitlines()
                        if ln.startswith("CapBnd:")).split()[1], 16)
    mine = [name for bit, name in enumerate(ALL_CAPS) if bounding >> bit & 1]  # every capability root has here
    spec["process"]["capabilities"] = {k: mine for k in ("bounding", "effective", "permitted")}
    spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "pid"]
    return _call_argv("/run/warm/warm.sock", Path("/w"))


def _chroot_host_view(spec: dict[str, Any], work: Path) -> list[str]:
    """The reported escape: the host's / read-only (a monitoring agent's hostPath) and Docker's SYS_CHROOT."""
    _docker_root(spec, work)
    spec["mounts"].append({"destination": "/host", "type": "bind", "source": "/", "options": ["rbind", "ro"]})
    return ["/bin/busybox", "chroot", "/host", *_call_argv(str(work / "run/warm.sock"), work)]


def _user_namespace(spec: dict[str, Any], work: Path) -> list[str]:
    spec["linux"]["namespaces"].append({"type": "user"})
    spec["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 0, "size": 1}, {"containerID": 1, "hostID": 100001,
                                                                                 "size": 65535}]
    spec["linux"]["gidMappings"] = spec["linux"]["uidMappings"]
    return _call_argv("/run/warm/warm.sock", Path("/w"))


@pytest.mark.parametrize("shape", [_docker_root, _all_caps_host_pid, _chroot_host_view, _user_namespace],
                         ids=["root with Docker's capabilities", "every capability and the host's pid namespace",
                              "chroot into a read-only view of the host", "user namespace mapping root to root"])
def test_a_container_with_the_socket_is_not_served(helper: tuple[Daemon, Path], base_rootfs: str, tmp_path: Path,
                                                   shape: Edit) -> None:
    """Real runc runs the caller in a container that has the helper's socket directory bind-mounted in."""
    daemon, work = helper
    spec = oci_config(["true"], uid=0, gid=0)
    spec["mounts"] += [{"destination": "/run/warm", "type": "bind", "source": str(daemon.sock.parent),
                        "options": ["rbind"]},
                       {"destination": "/w", "type": "bind", "source": str(work), "options": ["rbind", "ro"]}]
    spec["process"]["args"] = shape(spec, work)
    bundle = tmp_path / "bundle"
    make_bundle(str(bundle), spec, base_rootfs)
    cid = f"wc-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(["runc", "run", "--bundle", str(bundle), cid], capture_output=True, text=True, timeout=60,
                          check=False)
    subprocess.run(["runc", "delete", "-f", cid], capture_output=True, check=False)
    said = done.stdout.strip()
    assert said == "direct" or said.startswith("connect: "), done.stdout + done.stderr
    assert "exit" not in said and "exec" not in said
