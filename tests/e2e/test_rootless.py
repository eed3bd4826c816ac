"""Rootless engines: a non-root user's own Podman (its user namespace, its storage) and its own dockerd (20.10 and 28,
over RootlessKit), with gpuhook's CDI specs, its hooks.d entry and gpuhook-runtime.

The user, its /etc/subuid and /etc/subgid ranges and its groups exist only in a private mount namespace the
module holds (an overlay on /etc), so the host's /etc is never written and they go with the namespace. A
rootless runtime cannot make device nodes: runc and crun bind-mount each node from the host at the container's
path (/dev/kfd from /dev/kfd), not from a CDI hostPath. So the namespace's /dev is a tmpfs holding the host's
basic nodes and, at the vendors' paths, the simulated host's GPU nodes (real character devices of majors no
driver here serves: an open() that the permissions allow fails with ENXIO, one they refuse with EACCES). CDI
specs go to the namespace's own /etc/cdi, and /run/cdi there is empty, so no other test's spec is seen.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec, build_host

from . import conftest

NEEDED = ("podman", "crun", "newuidmap", "newgidmap", "unshare", "nsenter", "runuser", "useradd")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in NEEDED) and not os.environ.get("CI"),
                                reason="rootless Podman needs podman, crun and uidmap's newuidmap "
                                       "(tests/debian-packages.txt; CI must not skip)")
USER = "gpuhook-rootless"
SUBIDS = 65536
IMAGE = "localhost/gpuhook-rootless:latest"
# the GPU nodes of HostSpec(nvidia=2, amd=2), bound at their own paths in the namespace's /dev
NODES = ("nvidia0", "nvidia1", "nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "kfd",
         "dri/card0", "dri/card1", "dri/card2", "dri/renderD128", "dri/renderD129")
ENXIO = "No such device or address"  # the node opened: no driver serves its major here
EACCES = "Permission denied"

SETUP = r"""
set -eu
W="$1" uid="$2"
mount --make-rprivate /
# this checkout and its packages where the user reaches them (the clone may sit under root's 0700 home)
mount --bind "$3" "$W/py/hook" && mount --bind "$4" "$W/py/purelib"
# crun refuses a hybrid cgroup layout (v1 with a cgroup2 beside it); rootless containers get no cgroups here
if mountpoint -q /sys/fs/cgroup/unified; then umount /sys/fs/cgroup/unified; fi
mkdir -p "$W/etc-upper" "$W/etc-work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$W/etc-upper,workdir=$W/etc-work" /etc
getent group 109 >/dev/null || groupadd -g 109 gpuhook-render
getent group 44 >/dev/null || groupadd -g 44 gpuhook-video
useradd -M -d "$W/home" -u "$uid" -U -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0 -G 44,109 USER
start=$(cat /etc/subuid /etc/subgid 2>/dev/null |
        awk -F: 'BEGIN {m = 100000} {if ($2 + $3 > m) m = $2 + $3} END {print m}')  # past every range there
echo "USER:$start:SUBIDS" >> /etc/subuid
echo "USER:$start:SUBIDS" >> /etc/subgid
mkdir -p /etc/cdi /etc/gpuhook && cp "$W/user-config.toml" /etc/gpuhook/config.toml
if [ -d /run/cdi ]; then mount -t tmpfs -o mode=755 tmpfs /run/cdi; fi
mkdir -p "$W/home" "$W/xdg" && chown "$uid:$uid" "$W/home" "$W/xdg" && chmod 700 "$W/xdg"
mkdir "$W/dev"
mount --rbind /dev "$W/dev" && mount --make-rprivate "$W/dev"
mount -t tmpfs -o mode=755,nosuid tmpfs /dev
for n in null zero full random urandom tty ptmx; do touch "/dev/$n"; mount --bind "$W/dev/$n" "/dev/$n"; done
for d in pts shm mqueue; do if [ -d "$W/dev/$d" ]; then mkdir "/dev/$d"; mount --rbind "$W/dev/$d" "/dev/$d"; fi; done
mkdir /dev/dri
for n in NODES; do touch "/dev/$n"; mount --bind "$W/host/dev/$n" "/dev/$n"; done
mount --make-rshared /
""".replace("USER", USER).replace("SUBIDS", str(SUBIDS)).replace("NODES", " ".join(NODES))


def _python() -> str:
    """An interpreter the test user may run (the hooks run as that user): this one where every directory on its
    way is searchable by others, else the system's of the same version."""
    real = os.path.realpath(sys.executable)
    parts = Path(real).parents
    if all(os.stat(p).st_mode & 0o001 for p in parts):
        return real
    system = "/usr/bin/python3"
    found = subprocess.run([system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True,
                           check=False).stdout.strip()
    if found != str(tuple(sys.version_info[:2])):
        pytest.skip(f"{real} is not reachable by other users and {system} is not Python {sys.version_info[:2]}")
    return system


def _free_uid() -> int:
    """A uid no host user has."""
    taken = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 3}
    return next(u for u in range(47000, 48000) if u not in taken)


class Rootless:
    """The private namespace, the user and its Podman."""

    def __init__(self, work: Path, holder: subprocess.Popen[bytes], uid: int, bindir: str) -> None:
        self.work, self.holder, self.uid, self.bindir = work, holder, uid, bindir
        self.config = work / "config.toml"
        self.host = str(work / "host")

    def root(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`argv` as root in the namespace."""
        r = subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", "--", *argv], capture_output=True,
                           text=True, timeout=120, check=False)
        if check:
            assert r.returncode == 0, f"{argv}: {r.stderr}"
        return r

    def gpuhook(self, *args: str) -> subprocess.CompletedProcess[str]:
        """gpuhook as root in the namespace, on the simulated host."""
        return self.root("env", "-i", f"PATH={os.environ['PATH']}", f"GPUHOOK_CONFIG={self.config}",
                         f"{self.bindir}/gpuhook", *args, check=False)

    def podman(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The user's rootless Podman (vfs storage in its home, no cgroups, no network)."""
        w = self.work
        return self.root("runuser", "-u", USER, "--", "env", "-i", f"PATH={os.environ['PATH']}",
                         f"HOME={w}/home", f"XDG_RUNTIME_DIR={w}/xdg", "podman", "--root", f"{w}/home/storage",
                         "--runroot", f"{w}/xdg/run", "--storage-driver", "vfs", "--events-backend", "file",
                         "--cgroup-manager", "cgroupfs", *args, check=False)

    def run(self, *args: str, runtime: str = "crun") -> subprocess.CompletedProcess[str]:
        """`podman run --rm` of the test image."""
        *options, script = args
        return self.podman("run", "--rm", "--net", "none", "--runtime", runtime, *options, IMAGE, "sh", "-c", script)

    def spec(self, vendor: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """`gpuhook cdi generate` of `vendor` into the namespace's /etc/cdi."""
        return self.gpuhook("cdi", "generate", "--vendor", vendor, "--output", f"/etc/cdi/gpuhook-{vendor}.json",
                            *extra)


def _user_pids(uid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    out.append(int(entry))
            except OSError:
                pass
    return out


def _wait_private(pid: int) -> None:
    """Until process `pid` (unshare, then sleep) runs in a mount namespace other than this process's."""
    for _ in range(200):
        try:
            if (os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
                    and os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "sleep"):
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("unshare -m did not give the holder a mount namespace of its own")


@pytest.fixture(scope="module")
def rootless(base_rootfs: str) -> Iterator[Rootless]:
    work = Path(tempfile.mkdtemp(prefix="gpuhook-rootless-", dir="/tmp"))
    work.chmod(0o755)  # the user reaches the host, the config and the launchers; its own dirs are 0700
    build_host(str(work / "host"), HostSpec(nvidia=2, amd=2))
    bindir = work / "bin"
    bindir.mkdir()
    from gpuhook.cli.launcher import write_launchers

    for d in ("hook", "purelib"):  # SETUP binds this checkout's hook/ and packages here
        (work / "py" / d).mkdir(parents=True)
    write_launchers(str(bindir), _python(), [str(work / "py/hook"), str(work / "py/purelib")])
    (work / "config.toml").write_text(f'host_root = "{work}/host"\nstate_dir = "{work}/state"\n'
                                      f'log_file = "{work}/gpuhook.log"\n')
    # the hooks.d entry's and the shim's (/etc/gpuhook/config.toml in the namespace): a state_dir and a simulated
    # NVML log the user could write, so that a rootless hook or shim that went on would leave a trace (_untouched)
    (work / "user-config.toml").write_text(f'host_root = "{work}/host"\nstate_dir = "{work}/home/state"\n')
    Path(work, "host/var/lib/gpuhook-sim").chmod(0o777)
    subprocess.run(["tar", "-C", base_rootfs, "-cf", str(work / "image.tar"), "."], check=True)
    (work / "image.tar").chmod(0o644)
    uid = _free_uid()
    holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "infinity"])
    env = Rootless(work, holder, uid, str(bindir))
    try:
        _wait_private(holder.pid)  # never set up in this test's own mount namespace: it would be the host's /etc
        env.root("sh", "-c", SETUP, "setup", str(work), str(uid), conftest.HOOK_DIR, sysconfig.get_paths()["purelib"])
        imported = env.podman("import", str(work / "image.tar"), IMAGE)
        assert imported.returncode == 0, imported.stderr
        yield env
    finally:
        for pid in _user_pids(uid):  # the user's Podman pause process and conmons: started by this module
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        holder.kill()
        holder.wait()
        shutil.rmtree(work, ignore_errors=True)  # its storage, owned by its subordinate ids


def test_the_user_is_rootless(rootless: Rootless) -> None:
    """Podman runs as the user, in a user namespace mapping only the user and its subordinate ids."""
    info = rootless.podman("info", "--format", "{{.Host.Security.Rootless}} {{json .Host.IDMappings.UIDMap}}")
    assert info.returncode == 0, info.stderr
    rootless_flag, uid_map = info.stdout.split(" ", 1)
    assert rootless_flag == "true"
    assert {"container_id": 0, "host_id": rootless.uid, "size": 1} in json.loads(uid_map)


@pytest.fixture(scope="module")
def specs(rootless: Rootless) -> Rootless:
    """gpuhook's NVIDIA and AMD specs as `gpuhook cdi generate` writes them for the installed Podman."""
    for vendor in ("nvidia", "amd"):
        r = rootless.spec(vendor)
        assert r.returncode == 0, r.stderr
    return rootless


LIST = "ls /dev /dev/dri 2>/dev/null | grep -E '^(nvidia|kfd|card|renderD)' | tr '\\n' ' '; echo"
OPEN = "for n in {}; do cat $n 2>&1; done"


def test_amd_gpu_0_opens_with_the_users_own_groups(specs: Rootless) -> None:
    """--group-add keep-groups (crun): the process keeps the user's host groups (video, render), which open the
    GPU's 0660 nodes; GPU 1's nodes are not there."""
    r = specs.run("--group-add", "keep-groups", "--device", "amd.com/gpu=0",
                  f"{LIST}; {OPEN.format('/dev/dri/renderD128 /dev/dri/card1 /dev/kfd')}")
    lines = r.stdout.splitlines()
    assert lines and lines[0].split() == ["kfd", "card1", "renderD128"], r.stdout + r.stderr
    assert lines[1:] == [f"cat: can't open '{n}': {ENXIO}" for n in ("/dev/dri/renderD128", "/dev/dri/card1",
                                                                      "/dev/kfd")]


@pytest.mark.parametrize(("runtime", "options"), [
    ("crun", ()), ("runc", ()),
    ("crun", ("--group-add", "109", "--group-add", "44")),  # the namespace's 109: a subordinate gid on the host
    ("runc", ("--group-add", "keep-groups")),  # Podman 4.3 takes it, runc ignores it
], ids=["crun", "runc", "crun-group-add-gids", "runc-keep-groups"])
def test_amd_gpu_without_the_users_groups_is_refused_by_the_nodes(specs: Rootless, runtime: str,
                                                                   options: tuple[str, ...]) -> None:
    """Without the user's own groups kept the runtime sets the container's, and none of them is the host's render
    or video group (a gid in the user namespace maps to a subordinate id): the nodes refuse the open."""
    r = specs.run(*options, "--device", "amd.com/gpu=0", OPEN.format("/dev/dri/renderD128 /dev/kfd"),
                  runtime=runtime)
    assert r.stdout.splitlines() == [f"cat: can't open '{n}': {EACCES}" for n in ("/dev/dri/renderD128", "/dev/kfd")], \
        r.stdout + r.stderr


def test_keep_groups_once_in_the_users_containers_conf(specs: Rootless) -> None:
    """What --group-add keep-groups sets (crun's run.oci.keep_original_groups annotation), as the user's default in
    ~/.config/containers/containers.conf: every container of the user keeps its groups, no flag needed."""
    conf = specs.work / "home/.config/containers/containers.conf"
    specs.root("runuser", "-u", USER, "--", "mkdir", "-p", str(conf.parent))
    specs.root("runuser", "-u", USER, "--", "sh", "-c",
               f"printf '[containers]\\nannotations = [\"run.oci.keep_original_groups=1\"]\\n' > {conf}")
    try:
        r = specs.run("--device", "amd.com/gpu=1", OPEN.format("/dev/dri/renderD129 /dev/kfd"))
    finally:
        conf.unlink()
    assert r.stdout.splitlines() == [f"cat: can't open '{n}': {ENXIO}" for n in ("/dev/dri/renderD129", "/dev/kfd")], \
        r.stdout + r.stderr


def test_nvidia_gpu_0(specs: Rootless) -> None:
    """NVIDIA's nodes are 0666: GPU 0 and the shared nodes open, GPU 1 is absent, the driver's libraries load
    through the linker cache the spec's hook refreshes (it runs as the user, in the user namespace)."""
    r = specs.run("--device", "nvidia.com/gpu=0",
                  f"{LIST}; {OPEN.format('/dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm')}; "
                  "dlopen-probe libcuda.so.1; nvidia-smi", runtime="runc")  # runc says why a hook failed
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"]
    assert lines[1:4] == [f"cat: can't open '{n}': {ENXIO}" for n in ("/dev/nvidia0", "/dev/nvidiactl",
                                                                        "/dev/nvidia-uvm")]
    assert "dlopen libcuda.so.1 ok" in r.stdout and "GPUs: 1" in r.stdout


SHIPPED_HOOK = Path(__file__).parents[2] / "runtime-config/hooks.d/gpuhook.json"


@pytest.fixture(scope="module", params=["gpuhook", "gpuhook-hook"], ids=["python", "native-front-end"])
def hooks_dir(specs: Rootless, request: pytest.FixtureRequest) -> str:
    """gpuhook's hooks.d file (hook mode, as `gpuhook configure podman` installs it) for this checkout: the Python
    hook, or its native front end (install.sh's, where built), which starts it."""
    hooks = specs.work / f"hooks.d-{request.param}"
    hooks.mkdir(exist_ok=True)
    hook = json.loads(SHIPPED_HOOK.read_text())
    hook["hook"]["path"] = f"{specs.bindir}/{request.param}"
    hook["hook"]["env"] = [f"GPUHOOK_CONFIG={specs.work}/user-config.toml"]
    (hooks / "gpuhook.json").write_text(json.dumps(hook))
    return str(hooks)


NV0 = ("--annotation", "gpuhook.dev/gpus=0", "--annotation", "gpuhook.dev/vendor=nvidia")
CLOCKS = ("--annotation", "gpuhook.dev/clocks=1500")


def _untouched(env: Rootless) -> None:
    """Nothing of gpuhook's applied: no simulated NVML call set anything, no state (ledger, records) written, in
    either state_dir (the hooks.d entry's and the shim's is one the user could write)."""
    nvml = Path(env.host, "var/lib/gpuhook-sim/nvml.log")
    assert not nvml.exists() or "set-" not in nvml.read_text()
    assert not (env.work / "state").exists() and not (env.work / "home/state").exists()


TUNING = "gpuhook.dev/clocks asks gpuhook to change the host's GPUs"


@pytest.mark.parametrize(("asked", "said"), [
    pytest.param((*NV0, *CLOCKS), f"gpuhook hook: {TUNING}", id="hook-mode"),
    pytest.param(("--device", "nvidia.com/gpu=0", *CLOCKS), f"gpuhook hook: {TUNING}", id="cdi-device"),
    pytest.param(NV0, "gpuhook hook: this container's engine runs as uid {uid} on the host (a rootless engine: "
                 "no root on the host), which gpuhook's hook needs to give a container GPUs", id="hook-mode-gpus"),
])
def test_what_needs_root_is_refused_at_create(specs: Rootless, hooks_dir: str, asked: tuple[str, ...],
                                             said: str) -> None:
    """Tuning (or GPUs given by the hook) asked of a rootless engine through gpuhook's hooks.d entry: the hook,
    running as the user in its user namespace, says why in one line (runc shows a failed hook's stderr) and the
    container does not start."""
    _refused(specs, specs.run("--hooks-dir", hooks_dir, *asked, "echo started", runtime="runc"), said)


def test_the_cdi_specs_own_hook_refuses_tuning(specs: Rootless) -> None:
    """No hooks.d entry: the NVIDIA spec's createContainer hook (the linker cache's, run as the user) is the only
    gpuhook code that sees the annotation, and refuses it the same way."""
    r = specs.run("--hooks-dir", str(specs.work / "none"), "--device", "nvidia.com/gpu=0", *CLOCKS, "echo started",
                  runtime="runc")
    _refused(specs, r, f"gpuhook hook update-ldcache: {TUNING}")


def _refused(specs: Rootless, r: subprocess.CompletedProcess[str], said: str) -> None:
    assert r.returncode != 0 and "started" not in r.stdout
    ours = [ln for ln in r.stderr.splitlines() if "gpuhook" in ln]
    assert len(ours) == 1 and said.format(uid=specs.uid) in ours[0], r.stderr
    assert f"runs as uid {specs.uid} on the host" in ours[0] and "Traceback" not in r.stderr
    _untouched(specs)


@pytest.mark.parametrize(("asked", "said"), [
    pytest.param((*NV0, *CLOCKS), f"gpuhook-runtime: {TUNING}", id="tuning"),
    pytest.param(NV0, "gpuhook-runtime: this container's engine runs as uid {uid} on the host (a rootless engine: "
                 "no root on the host), which gpuhook's runtime needs to give a container GPUs", id="gpus"),
])
def test_gpuhook_runtime_refuses_at_create(specs: Rootless, asked: tuple[str, ...], said: str) -> None:
    """podman --runtime gpuhook-runtime, rootless: the shim runs as the user and refuses before it writes anything."""
    r = specs.run(*asked, "echo started", runtime=f"{specs.bindir}/gpuhook-runtime")
    _refused(specs, r, said)


def test_gpuhook_runtime_passes_through_what_asks_nothing_of_it(specs: Rootless) -> None:
    r = specs.run("--device", "/dev/nvidia1", OPEN.format("/dev/nvidia1"), runtime=f"{specs.bindir}/gpuhook-runtime")
    assert r.stdout.splitlines() == [f"cat: can't open '/dev/nvidia1': {ENXIO}"], r.stdout + r.stderr


def test_crun_refuses_too(specs: Rootless, hooks_dir: str) -> None:
    """crun says only that the hook failed (its stderr is not shown); the container does not start either."""
    r = specs.run("--hooks-dir", hooks_dir, *NV0, *CLOCKS, "echo started")
    assert r.returncode != 0 and "started" not in r.stdout
    assert "error executing hook" in r.stderr and "gpuhook" in r.stderr
    _untouched(specs)


def test_a_container_without_annotations_runs_no_gpuhook_hook(specs: Rootless, hooks_dir: str) -> None:
    """hooks.d's gpuhook entry is for gpuhook.dev/ annotations only: a rootless CDI container without them runs."""
    r = specs.run("--hooks-dir", hooks_dir, "--group-add", "keep-groups", "--device", "amd.com/gpu=1",
                  "ls /dev/dri; cat /dev/kfd 2>&1")
    assert r.stdout.split()[:2] == ["card2", "renderD129"] and ENXIO in r.stdout, r.stderr


# --- rootless Docker: Debian's dockerd-rootless.sh over RootlessKit (Debian's rootlesskit), the user's own dockerd --

ROOTLESS_SH = "/usr/share/docker.io/contrib/dockerd-rootless.sh"  # docker.io's


class RootlessDocker:
    """A user's rootless dockerd of one generation and its CLI."""

    def __init__(self, env: Rootless, generation: str, sock: str, docker: str) -> None:
        self.env, self.generation, self.sock, self.docker = env, generation, sock, docker

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`docker run --rm` of the test image as the user."""
        *options, script = args
        return self.env.root("runuser", "-u", USER, "--", self.docker, "-H", self.sock, "run", "--rm", "--net",
                             "none", *options, "gpuhook-rootless:latest", "sh", "-c", script, check=False)


def _programs(generation: str, into: Path) -> str:
    """A directory the user may run holding `generation`'s dockerd, CLI, containerd and shim (a copy of the build's,
    which sits in root's cache); Debian's for 20.10."""
    if generation == "20.10":
        return "/usr/bin"
    from tests.support import docker_engine

    built = docker_engine.build(generation)
    into.mkdir()
    for name in ("dockerd", "docker", "containerd", "containerd-shim-runc-v2", "docker-proxy"):
        shutil.copy(os.path.realpath(os.path.join(built.bindir, name)), into / name)
    into.chmod(0o755)
    return str(into)


@pytest.fixture(scope="module", params=["20.10", "28"])
def rootless_docker(specs: Rootless, request: pytest.FixtureRequest) -> Iterator[RootlessDocker]:
    if shutil.which("rootlesskit") is None and not os.environ.get("CI"):
        pytest.skip("rootless Docker needs rootlesskit (tests/debian-packages.txt)")
    generation = request.param
    w = specs.work
    run = w / f"xdg/docker-{generation}"
    specs.root("runuser", "-u", USER, "--", "mkdir", "-p", str(run))
    programs = _programs(generation, w / f"docker-{generation}")
    sock = f"unix://{run}/docker.sock"
    flags = ["--data-root", f"{w}/home/docker-{generation}", "--exec-root", f"{run}/exec", "-H", sock,
             "--pidfile", f"{run}/docker.pid", "--iptables=false", "--ip6tables=false", "--bridge=none",
             "--storage-driver", "vfs", "--add-runtime", f"gpuhook={specs.bindir}/gpuhook-runtime"]
    if generation == "20.10":
        flags.remove("--ip6tables=false")
    else:  # RootlessKit's copy-up makes /etc/cdi and /var/run/cdi links, which CDI's directory walk does not follow
        flags += ["--cdi-spec-dir", "/etc/cdi", "--cdi-spec-dir", f"{w}/cdi"]
        made = specs.gpuhook("cdi", "generate", "--vendor", "amd", "--output-dir", f"{w}/cdi")
        assert made.returncode == 0, made.stderr
    env = ["env", "-i", f"PATH={programs}:{specs.bindir}:{os.environ['PATH']}", f"HOME={w}/home",
           f"XDG_RUNTIME_DIR={w}/xdg", "DOCKERD_ROOTLESS_ROOTLESSKIT_NET=host",
           "DOCKERD_ROOTLESS_ROOTLESSKIT_PORT_DRIVER=none"]  # no network: no slirp4netns needed
    log = (w / f"dockerd-{generation}.log").open("w")
    daemon = subprocess.Popen(["nsenter", "-t", str(specs.holder.pid), "-m", "--", "runuser", "-u", USER, "--", *env,
                               ROOTLESS_SH, *flags], stdout=log, stderr=log)
    docker = RootlessDocker(specs, generation, sock, f"{programs}/docker")
    try:
        for _ in range(120):
            up = specs.root("runuser", "-u", USER, "--", docker.docker, "-H", sock, "version", check=False)
            if up.returncode == 0:
                break
            assert daemon.poll() is None, (w / f"dockerd-{generation}.log").read_text()[-3000:]
            time.sleep(0.5)
        imported = specs.root("sh", "-c", f'runuser -u {USER} -- "$1" -H "$2" import - gpuhook-rootless:latest < "$3"',
                              "import", docker.docker, sock, str(w / "image.tar"), check=False)
        assert imported.returncode == 0, imported.stderr
        yield docker
    finally:
        daemon.terminate()  # RootlessKit and the dockerd it runs, as the user
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()


def test_docker_cannot_see_etc_cdi(rootless_docker: RootlessDocker) -> None:
    """Under RootlessKit /etc/cdi is a link into the host's /etc (--copy-up=/etc) and the CDI library's walk of a
    spec directory does not follow it: the NVIDIA spec, only there, is unresolvable; the AMD one, also in a plain
    directory the daemon names (--cdi-spec-dir), resolves."""
    r = rootless_docker.run("--device", "nvidia.com/gpu=0", "true")
    if rootless_docker.generation == "20.10":  # no CDI at all: the name is taken for a host path
        assert r.returncode != 0 and "nvidia.com/gpu=0" in r.stderr, r.stderr
        return
    assert r.returncode != 0 and "unresolvable CDI devices nvidia.com/gpu=0" in r.stderr, r.stderr


def test_docker_amd_gpu_nodes_without_the_users_groups(rootless_docker: RootlessDocker) -> None:
    """What rootless Docker gives an AMD GPU: Docker 28 resolves gpuhook's CDI device to exactly GPU 0's nodes, but
    its runc sets the container's own groups (Docker has no keep-groups, and Debian 12's crun 1.8.1, which keeps
    them, refuses Docker 28's config: "unknown version specified"), so the 0660 nodes refuse the open; Docker 20.10
    (no CDI) the same with --device."""
    d = rootless_docker
    nodes = ("/dev/kfd", "/dev/dri/renderD128")
    if d.generation == "20.10":
        r = d.run("--device", nodes[0], "--device", nodes[1], f"{LIST}; {OPEN.format(' '.join(nodes))}")
    else:
        r = d.run("--device", "amd.com/gpu=0", f"{LIST}; {OPEN.format(' '.join(nodes))}")
    lines = r.stdout.splitlines()
    expected = ["kfd", "renderD128"] if d.generation == "20.10" else ["kfd", "card1", "renderD128"]
    assert lines and lines[0].split() == expected, r.stdout + r.stderr
    assert lines[1:] == [f"cat: can't open '{n}': {EACCES}" for n in nodes]


@pytest.mark.parametrize(("asked", "said"), [
    (("--gpus", "device=0"), "which gpuhook's runtime needs to give a container GPUs"),
    (("--device", "/dev/nvidia0", "-e", "GPUHOOK_CLOCKS=1500"), "GPUHOOK_CLOCKS asks gpuhook to change the host's"),
], ids=["gpus", "tuning-env"])
def test_docker_gpuhook_runtime_refuses(rootless_docker: RootlessDocker, asked: tuple[str, ...],
                                        said: str) -> None:
    """gpuhook-runtime registered with the user's dockerd runs as the user: GPUs it would give and tuning are
    refused in one line, before anything is written (config.json is the engine's, untouched)."""
    r = rootless_docker.run("--runtime", "gpuhook", *asked, "echo started")
    assert r.returncode != 0 and "started" not in r.stdout
    assert said in r.stderr and f"runs as uid {rootless_docker.env.uid} on the host" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    _untouched(rootless_docker.env)


def test_docker_without_gpuhook_requests_passes_through_the_runtime(rootless_docker: RootlessDocker) -> None:
    """A plain --device container with gpuhook's runtime: nothing asked of gpuhook, the runtime binds the node."""
    r = rootless_docker.run("--runtime", "gpuhook", "--device", "/dev/nvidia1", OPEN.format("/dev/nvidia1"))
    assert r.stdout.splitlines() == [f"cat: can't open '/dev/nvidia1': {ENXIO}"], r.stdout + r.stderr

