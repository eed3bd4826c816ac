"""`gpuhook doctor`: can `systemctl daemon-reload` take the GPUs from running containers?

The most reported GPU container failure, "Failed to initialize NVML: Unknown Error" some time after start: with
the systemd cgroup driver systemd owns the container's device cgroup and rewrites it from the unit's
`DeviceAllow=` on every daemon-reload. runc passes the spec's rules as `/dev/char/MAJOR:MINOR` paths, and a rule is
lost where that path does not exist and runc is older than 1.1.7 (1.1.3 to 1.1.6 skip it) or systemd older than
240 (which stats the path); `gpuhook system create-dev-char-links` makes the paths. Rules a hook added behind the
runtime's back (hook mode) never reach systemd: they are lost whatever the versions.
"""

from __future__ import annotations

import os

from gpuhook.apply.containers import live_records
from gpuhook.cli.findings import Finding
from gpuhook.engines.engine import CgroupDriver
from gpuhook.engines.table import all_engines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.config import Config
    from gpuhook.host.inventory import Inventory

SYSTEMD_RUNNING = "/run/systemd/system"  # exists when systemd is the init (sd_booted)
# who else sets a cgroup driver: the kubelet (kubeadm writes it; the default is cgroupfs), as (name, program, driver)
OTHERS = (("kubelet", "kubelet", CgroupDriver(path="/var/lib/kubelet/config.yaml", systemd_mark="cgroupdriver:systemd",
                                              cgroupfs_mark="", default="cgroupfs")),)
HOOK_FILES = ("/usr/share/containers/oci/hooks.d/gpuhook.json", "/etc/containers/oci/hooks.d/gpuhook.json")


def cgroup_drivers() -> tuple[tuple[str, str, CgroupDriver], ...]:
    """Who may use the systemd cgroup driver here, as (name, program, where its driver is set): every engine (its
    record's cgroup driver: installed without that file, it uses its default) and OTHERS."""
    return (*((e.name, e.program, e.cgroup) for e in all_engines()), *OTHERS)


def systemd_driver(name: str, text: str, cgroup_v2: bool) -> bool:
    """Whether engine (or kubelet) `name`, whose config file holds `text`, uses the systemd cgroup driver: what the
    file says, else its default (cgroup_drivers). Pure; KeyError for a name none has."""
    return {who: driver for who, _, driver in cgroup_drivers()}[name].systemd(text, cgroup_v2)


def version(text: str, name: str) -> tuple[int, ...] | None:
    """The version in a tool's `--version` output ("runc version 1.1.5+ds1", "systemd 252 (252.38-1)"). Pure."""
    words = text.split()
    if len(words) < 2 or words[0] != name:
        return None
    word = words[2] if words[1] == "version" and len(words) > 2 else words[1]
    nums = []
    for part in word.split("+")[0].split("~")[0].split("-")[0].split("."):
        if not part.isdigit():
            break
        nums.append(int(part))
    return tuple(nums) or None


def assess(runc: tuple[int, ...] | None, systemd: tuple[int, ...] | None, drivers: list[str], scoped: list[str],
           hook_files: list[str], unlinked: list[str], hooks_d: frozenset[str] | None = None) -> list[Finding]:
    """The findings, from: runc's and systemd's versions (None: not runc / not found), the engines using the systemd
    driver, GPU containers in systemd scopes, gpuhook's hooks.d files, GPU nodes without a /dev/char link, and the
    engines that run hooks.d entries (default: those whose records say so). Pure."""
    if hooks_d is None:
        hooks_d = frozenset(e.name for e in all_engines() if e.hooks_d)
    users = [*drivers, *(f"container {c}" for c in scoped)]
    if not users:
        return [Finding("ok", "no engine here uses the systemd cgroup driver: daemon-reload leaves GPU containers' "
                        "devices alone")]
    who = ", ".join(users)
    out = []
    old = []
    if runc is not None and runc < (1, 1, 7):
        old.append(f"runc {'.'.join(map(str, runc))} (< 1.1.7)")
    if systemd is not None and systemd < (240,):
        old.append(f"systemd {systemd[0]} (< 240)")
    if old and unlinked:
        out.append(Finding("warn", f"the systemd cgroup driver ({who}) with {' and '.join(old)}: a daemon-reload "
                           f"drops the device rules of nodes without a /dev/char link ({', '.join(unlinked)}), and "
                           "running GPU containers lose them ('Failed to initialize NVML: Unknown Error')",
                           "gpuhook system create-dev-char-links (after each boot, once the driver made the nodes), "
                           "or upgrade runc to 1.1.7+ and systemd to 240+"))
    elif old:
        out.append(Finding("ok", f"the systemd cgroup driver ({who}) with {' and '.join(old)}, but every GPU node has "
                           "its /dev/char link: daemon-reload keeps the spec's device rules"))
    else:
        out.append(Finding("ok", f"the systemd cgroup driver ({who}) keeps the spec's device rules across "
                           "daemon-reload"))
    hooked = [e for e in drivers if e in hooks_d]
    if hook_files and (hooked or scoped):
        out.append(Finding("warn", f"hook mode ({', '.join(hook_files)}) with the systemd cgroup driver "
                           f"({', '.join(hooked or users)}): the device rules gpuhook's hook adds are not in the "
                           "container's unit, and a daemon-reload takes the GPUs from running containers",
                           "run GPU containers through gpuhook-runtime or CDI (gpuhook cdi generate), whose rules are "
                           "in the spec; or set cgroup_manager = \"cgroupfs\""))
    return out


def checks(config: Config, inventory: Inventory) -> list[Finding]:
    """The daemon-reload findings for this host. Reads engine configs and state_dir; runs runc and systemctl
    --version."""
    if not os.path.isdir(SYSTEMD_RUNNING):
        return [Finding("ok", "systemd is not the init: no daemon-reload can rewrite GPU containers' devices")]
    from gpuhook.apply.cgroups import unified
    from gpuhook.apply.dev_char_links import state, wanted
    from gpuhook.host.root import Root

    systemd_users = []
    for name, program, driver in cgroup_drivers():
        try:
            with open(driver.path) as f:
                text = f.read(1 << 20)
        except OSError:
            if _which(program) is None:
                continue
            text = ""
        if driver.systemd(text, unified()):
            systemd_users.append(name)
    root = Root(config.host_root)
    nodes = [n for v in inventory.vendors for n in (*v.shared_nodes, *(n for g in v.gpus for n in g.nodes))]
    unlinked = [link.node for link in wanted(nodes) if state(root, link) != "ok"]
    return assess(version(_first_line(config.runtime, "--version"), "runc"),
                  version(_first_line("systemctl", "--version"), "systemd"), systemd_users,
                  _scoped(config.state_dir), [p for p in HOOK_FILES if os.path.exists(p)], unlinked)


def _first_line(program: str, *args: str) -> str:
    """The first line `program` (a path, or a name on PATH) writes; empty where it is not there or fails."""
    from gpuhook.errors import GpuhookError
    from gpuhook.proc import run

    found = _which(program)
    if found is None:
        return ""
    try:
        return (run([found, *args], timeout=10).splitlines() or [""])[0]
    except GpuhookError:
        return ""


def _which(program: str) -> str | None:
    """`program` (a path, or a name on this process's PATH) as an absolute path, where it is executable."""
    dirs = [""] if "/" in program else os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(":")
    for d in dirs:
        path = os.path.join(d, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


def _scoped(state_dir: str) -> list[str]:
    """Running GPU containers whose cgroup is a systemd scope (the systemd driver made it)."""
    out = []
    for rec in live_records(state_dir):
        try:
            with open(f"/proc/{rec.pid}/cgroup") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if any(ln.split(":", 2)[-1].endswith(".scope") for ln in lines):
            out.append(rec.id)
    return out
