"""gpuhook-runtime: a runc-compatible shim. Edits config.json on create/run when GPUs are asked for,
then execs the real runtime with every argument unchanged.

The pass-through path sits in front of every container on a host (gpuhook.startup): it imports only os, sys
and the tiny config reader (its table cached), looks for request markers in config.json's bytes, and execs
the runtime untouched; runc validates its own config. Nothing heavier loads unless a marker is there:
`gpuhook.dev/` or `_VISIBLE_DEVICES`, the suffix of every vendor's env key (then the vendors' own keys
decide).
"""

from __future__ import annotations

import os
import sys

from gpuhook.configfile import config_path, read_config, read_regular, remember_runtime
from gpuhook.errors import GpuhookError, RuntimeNotFoundError, SpecError, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

_GLOBAL_VALUE_FLAGS = {"--root", "--log", "--log-format", "--criu", "--rootless"}
_CMD_VALUE_FLAGS = {"--bundle", "-b", "--console-socket", "--pid-file", "--preserve-fds"}
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MARKERS = (b"gpuhook.dev/", b"_VISIBLE_DEVICES")  # see gpuhook.vendors.registry
MAX_SPEC = 16 << 20  # the native front end's limit too (runtime.c): larger is not a bundle's config


class RuncArgs:
    """What the shim needs from a runc command line: the command, bundle, container id, log options."""

    __slots__ = ("bundle", "command", "container_id", "log", "log_format", "root")

    def __init__(self, argv: list[str]) -> None:
        self.command: str | None = None
        self.bundle = "."
        self.container_id = ""
        self.log: str | None = None
        self.log_format = "text"
        self.root = "/run/runc"  # runc's default state directory
        i = 0
        while i < len(argv):
            arg = argv[i]
            name, eq, value = arg.partition("=")
            if self.command is None:
                if name in _GLOBAL_VALUE_FLAGS:
                    if not eq:
                        i += 1
                        value = argv[i] if i < len(argv) else ""
                    if name == "--log":
                        self.log = value
                    elif name == "--root":
                        self.root = value
                    elif name == "--log-format":
                        self.log_format = value
                elif not arg.startswith("-"):
                    self.command = arg
            elif name in _CMD_VALUE_FLAGS:
                if not eq:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
                if name in ("--bundle", "-b"):
                    self.bundle = value
            elif not arg.startswith("-") and not self.container_id:
                self.container_id = arg
            i += 1


def main() -> NoReturn:
    """Entry point of gpuhook-runtime: maybe edit config.json, then exec the runtime."""
    args = RuncArgs(sys.argv[1:])
    runtime = prepare(args)
    if args.command is None and any(a in ("--version", "-v") for a in sys.argv[1:]):  # as NVIDIA's runtime does
        from gpuhook import __version__

        _say_out(f"gpuhook-runtime version {__version__}\n")
    try:
        os.execv(runtime, [runtime, *sys.argv[1:]])
    except OSError as e:
        _fail(args, f"cannot execute the runtime {runtime}: {e.strerror}")


def prepare(args: RuncArgs, creator: int | None = None) -> str:
    """The shim's work before the runtime runs: config.json edited on create/run when GPUs are asked for; the
    runtime's path. `creator` is the process that execs the runtime (this one, or the warm helper's caller).
    A refusal exits (SystemExit 1) after saying why."""
    table: dict[str, object] | None = None  # once the config is read: where a refusal is counted
    try:
        path, explicit = config_path()
        table, validated = read_config(path, explicit)
        runtime = find_runtime(str(table.get("runtime", "runc")))
        from gpuhook.vendors.registry import node_prefixes

        remember_runtime(path, runtime, node_prefixes())  # for the native front end's pass-through
        if args.command in ("create", "run"):
            _maybe_inject(args, table, path, validated, os.getpid() if creator is None else creator)
    except GpuhookError as e:
        _count_refusal(table, e)
        _fail(args, str(e))
    except OSError as e:  # a full or read-only state_dir, a vanished bundle: say which file
        _count_refusal(table, e)
        where = f"{e.filename}: " if e.filename else ""
        _fail(args, f"{where}{e.strerror or e}; config.json was not changed")
    except Exception as e:  # fail closed: never start a GPU container half-understood
        _count_refusal(table, e)
        _fail(args, f"internal error ({type(e).__name__}: {e}); config.json was not changed, please report this")
    return runtime


def _maybe_inject(args: RuncArgs, table: dict[str, object], path: str, validated: bool, creator: int) -> None:
    spec_path = os.path.join(args.bundle, "config.json")
    try:
        data = read_regular(spec_path, 0, MAX_SPEC)  # a FIFO there is refused, not waited on
    except OSError as e:
        raise SpecError(f"bundle {os.path.abspath(args.bundle)} has no readable config.json ({e.strerror})") from e
    from gpuhook.vendors.registry import markers, node_prefixes

    asks = any(m in data for m in _MARKERS) and any(m in data for m in markers())
    if not asks and not any(p.encode() in data for p in node_prefixes()):
        return
    from gpuhook.host.userns import own_host_uid

    host_uid = own_host_uid()
    if host_uid:  # a rootless engine's runtime: nothing of root's (state_dir, the GPUs) is written or applied
        from gpuhook.fastjson import loads
        from gpuhook.plan import rootless

        try:
            spec = loads(data)
        except (ValueError, RecursionError) as e:
            raise SpecError(f"config.json is not valid JSON ({e})") from e
        rootless.check_spec(spec, host_uid, "gpuhook's runtime")  # GPU nodes the engine put there: its runtime's
        return
    from gpuhook.gpu_path.inject import edit_bundle

    for w in edit_bundle(data, args.bundle, args.container_id, table, path, validated, args.root, creator, asks):
        _say(f"gpuhook-runtime: warning: {w}")


def _count_refusal(table: dict[str, object] | None, error: BaseException) -> None:
    """One more refused container, by the error's class (the exporter's counter), in the config's state_dir; not
    counted when the config itself could not be read. Appends to a state file; never raises."""
    state_dir = (table or {}).get("state_dir", "/run/gpuhook")
    if table is None or not isinstance(state_dir, str) or not state_dir.startswith("/"):
        return
    from gpuhook.host.userns import own_host_uid

    if own_host_uid():  # a rootless engine's runtime: the counters are root's
        return
    from gpuhook.apply import counters

    counters.bump(state_dir, counters.REFUSED, counters.reason(error))


def find_runtime(name: str) -> str:
    """The absolute path of the runtime `name` (a path, or a name on PATH); never this shim itself."""
    if "/" in name:
        candidates = [name]
    else:
        candidates = [os.path.join(d, name) for d in os.environ.get("PATH", _DEFAULT_PATH).split(":") if d]
    me = os.path.realpath(sys.argv[0])
    selves = {me, os.path.join(os.path.dirname(me), "gpuhook-runtime")}  # this shim, or its native front end
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            if os.path.realpath(c) in selves:
                raise RuntimeNotFoundError(f"runtime {name!r} is gpuhook-runtime itself: set `runtime` in "
                                           "the gpuhook config to the real runtime (e.g. /usr/sbin/runc)")
            return os.path.abspath(c)
    where = "" if "/" in name else " on PATH"
    raise RuntimeNotFoundError(f"runtime {name!r} not found{where}: install runc or set `runtime` in the "
                               "gpuhook config to the low-level runtime's absolute path")


def _fail(args: RuncArgs, message: str) -> NoReturn:
    """Report one line in runc's --log file (where containerd and CRI-O read a runtime's error), then on
    stderr, and exit 1. The log comes first and a closed or broken stderr is ignored: an engine that reads
    only the log, or has already closed the pipe, still gets the refusal, never a crash."""
    line = one_line(message)  # whatever the message quoted
    if args.log:
        _log_error(args.log, args.log_format, f"gpuhook: {line}")
    _say(f"gpuhook-runtime: {line}")
    sys.exit(1)


def _say_out(text: str) -> None:
    """`text` on stdout before the runtime adds its own; a closed stdout is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _say(line: str) -> None:
    """One line on stderr; a closed or broken stderr (EPIPE, EBADF) is not an error of the container's."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: started with fd 2 closed (None)
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (so that exiting does not flush the dead one: rc 120)


def _log_error(path: str, log_format: str, msg: str) -> None:
    """Append one error entry to runc's log in its --log-format (json as runc writes it, else logfmt)."""
    import time

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if log_format == "json":
        from gpuhook import fastjson

        entry = fastjson.dumps({"level": "error", "msg": msg, "time": stamp})
    else:
        escaped = msg.replace("\\", "\\\\").replace('"', '\\"')  # no forged fields in logfmt
        entry = f'time="{stamp}" level=error msg="{escaped}"'
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (entry + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass
