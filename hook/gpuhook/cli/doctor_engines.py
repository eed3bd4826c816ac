"""`gpuhook doctor`'s engine checks, over the engines' records (engines/table.py). For each engine found (its
program installed, or its config file there): its release (`PROGRAM --version`), whether that release reads CDI
specs (the record's CDI release table), which path its GPU containers take (the shim or the hook where gpuhook is
registered, the --gpus hook, CDI where gpuhook's specs are there to read), whether gpuhook is registered and how (by a
drop-in the main config imports, or in place), and one fix where its containers cannot get GPUs from gpuhook. Then
which nvidia-container-runtime-hook the daemon finds where an engine's `--gpus` runs one (`docker run --gpus`).
Each finding is (level, what[, fix])."""

from __future__ import annotations

import glob
import os
import shutil

from gpuhook.engines.table import all_engines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuhook.engines.engine import Engine

HOOK = "nvidia-container-runtime-hook"
CDI_HOOK = "nvidia-cdi-hook"  # Docker 29 resolves --gpus through CDI (nvidia.com/gpu=ID) where it finds this
GPUS_VIA_CDI = (29, 3)  # the first Docker that resolves --gpus through CDI specs (amd.com/gpu, nvidia.com/gpu)
TIME_NAMESPACES = (29, 5)  # the first Docker that gives every container a time namespace of its own (moby #52326)
RUNC_TIME_NAMESPACES = (1, 2)  # the first runc that makes one; older ones refuse such a spec
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a unit's PATH unless it sets one
_OURS = b"--revert removes"  # a line gpuhook marks as its own in a main config (containerd's imports line)


def checks(paths: dict[str, str] | None = None, proc: str = "/proc", search: str = SYSTEMD_PATH,
           version: Callable[[str], str] | None = None, cdi_specs: bool | None = None) -> list[tuple[str, ...]]:
    """One report per engine found on `search` or by its config file (`paths`: engine name -> another file, and only
    those engines), then the --gpus hook of each engine that has one. `version(program)` names a release (default:
    `PROGRAM --version`); `cdi_specs`: whether gpuhook's CDI specs are there (default: /etc/cdi, /var/run/cdi).
    Reads the engines' config files and /proc; runs each installed program's --version."""
    out: list[tuple[str, ...]] = []
    releases: dict[str, str] = {}
    engines = [e for e in all_engines() if paths is None or e.name in paths]
    specs = _gpuhook_specs() if cdi_specs is None else cdi_specs
    for engine in engines:
        path = engine.config_path if paths is None else paths[engine.name]
        program = shutil.which(engine.program, path=search)
        hook = engine.gpus_hook and program is not None and shutil.which(HOOK, path=search) is not None
        releases[engine.name] = (version or _version)(program) if program else ""
        out += report(engine, path, program, releases[engine.name], specs, hook)
    for engine in engines:
        if engine.gpus_hook and shutil.which(engine.program, path=search):
            out.append(gpus_hook(engine, _daemon_path(engine.program, proc, search), releases[engine.name]))
    return out


def report(engine: Engine, path: str, program: str | None, version: str, specs: bool,
           hook: bool = False) -> list[tuple[str, ...]]:
    """What doctor says of `engine` with its config at `path` (nothing where neither it nor `program` is there):
    release, CDI, the paths its GPU containers take, registration; a fix where they cannot get GPUs from gpuhook.
    Reads `path`, the drop-ins it imports (1 MiB each at most)."""
    name = engine.name
    text = _read(path)
    if text is None and program is None:
        return []
    ignored = engine.audit(path, text) if engine.audit is not None and text is not None else None
    if ignored is not None:
        return [("fail", f"{name}: {ignored[0]}", ignored[1])]
    head = f"{name} {version}" if version else f"{name} (release unknown)" if program else \
        f"{name} (not installed here)"
    cdi, reads = _cdi(engine, version)
    how, where, later = _registration(engine, path, text)
    if how in ("drop-in", "in place") and program is not None and engine.drop_in is not None and \
            engine.drop_in.dump and not _merged_has_gpuhook([program, "--config", path, *engine.drop_in.dump]):
        shadow = f": {later[-1]}, imported after it, replaces the section that holds it" if later else ""
        fix_path = f" --in-place --config-path {later[-1]}" if later else ""
        restart = f", then restart {engine.daemon.called}" if engine.daemon is not None else ""
        return [("fail", f"{head}: {cdi}; gpuhook is registered {where}, but {engine.program}'s merged config has no "
                 f"gpuhook runtime{shadow}", f"gpuhook configure {name}{fix_path}{restart}")]
    ways = ([engine.way] if how else []) + (["the hook (--gpus runs " + HOOK + ")"] if hook else []) + \
        (["CDI (gpuhook's specs)"] if reads and specs else [])
    restart = f", then restart {engine.daemon.called}" if engine.daemon is not None else ""
    if how == "unimported":
        return [("fail", f"{head}: {cdi}; {where}: its GPU containers do not get the gpuhook runtime",
                 f"gpuhook configure {name}{restart}")]
    if not how:
        gets = f"GPU containers take {' or '.join(ways)} only" if ways else "its containers cannot get GPUs"
        fix = f"gpuhook configure {name}{restart}" + (" (or gpuhook cdi generate: it reads CDI specs)"
                                                      if reads and not specs else "")
        return [("warn", f"{head}: {cdi}; {gets}: {where}", fix)]
    return [("ok", f"{head}: {cdi}; GPU containers take {' or '.join(ways)}; gpuhook registered {where}")]


def _registration(engine: Engine, path: str, text: bytes | None) -> tuple[str, str, list[str]]:
    """How `path` registers gpuhook: ("drop-in", ...), ("in place", ...), ("unimported", ...) for gpuhook's drop-in
    that the main config does not import, or ("", why not); and the imported files read after gpuhook's registration
    that do not name it, in the engine's order. Reads the files the main config imports."""
    drop = engine.drop_in
    main = (text or b"").decode(errors="replace")
    how, where, later = "", "", []
    if drop is not None and drop.fits(path, main):
        for pattern in drop.imports(main, path) if text is not None else []:
            for file in sorted(glob.glob(pattern)):
                if not _mentions(_read(file)):
                    later.append(file)
                elif not how:
                    how, where, later = "drop-in", f"by the drop-in {file}, which {path} imports", []
        default = drop.default_path(path)
        if not how and _mentions(_read(default)):
            return "unimported", f"{default} registers gpuhook but {path} does not import it", []
    if how:
        return how, where, later
    if _mentions(text):
        return "in place", f"in place in {path}", later
    if text is None:
        return "", f"{path} is absent: gpuhook is not registered", []
    return "", f"gpuhook is not registered in {path}", []


def _cdi(engine: Engine, version: str) -> tuple[str, bool]:
    """(what doctor says of the release's CDI, whether it reads CDI specs), from the record's release table."""
    from gpuhook.engines.engine import cdi_since

    if engine.cdi is None or not engine.cdi.releases:
        return "reads no CDI specs", False
    if not version:
        return f"reads CDI specs from {engine.label} {cdi_since(engine)} (its release is not known)", False
    library = engine.reader(version).library
    if library:
        return f"reads CDI specs (container-device-interface {library})", True
    return f"reads no CDI specs (from {engine.label} {cdi_since(engine)})", False


def _mentions(text: bytes | None) -> bool:
    """Whether a config file registers gpuhook: names it outside the lines gpuhook marks as its own imports."""
    return text is not None and any(b"gpuhook" in line and _OURS not in line for line in text.splitlines())


def _merged_has_gpuhook(argv: list[str]) -> bool:
    """Whether the engine's merged config (`argv` prints it) holds the gpuhook runtime; True where it cannot be
    printed (other checks say why). Runs it."""
    from gpuhook.errors import ProcessError
    from gpuhook.proc import run

    try:
        return "runtimes.gpuhook" in run(argv, timeout=10)
    except ProcessError:
        return True


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return None


def _version(program: str) -> str:
    """The release `program --version` names ("" where it names none or does not run). Runs it."""
    from gpuhook.apply.cdi_readers import version_in
    from gpuhook.errors import ProcessError
    from gpuhook.proc import run

    try:
        return version_in(run([program, "--version"], timeout=10)) or ""
    except ProcessError:
        return ""


def _gpuhook_specs() -> bool:
    """Whether gpuhook's CDI specs (gpuhook-<vendor> files) are in the engines' spec directories. Lists them."""
    from gpuhook.cli.cdi_files import spec_files

    return any(os.path.basename(p).startswith("gpuhook") for p in spec_files())


def gpus_hook(engine: Engine, search: str, version: str = "") -> tuple[str, ...]:
    """Whose nvidia-container-runtime-hook `engine`'s daemon finds on `search` (its PATH) for `--gpus`: gpuhook's,
    NVIDIA's, or none; from Docker 29.3 (`version`), CDI first where nvidia-cdi-hook is there, and AMD GPUs through
    CDI specs without either."""
    from gpuhook.request.requirements import version_tuple

    name, daemon = engine.name, engine.program
    found = shutil.which(HOOK, path=search)
    via_cdi = bool(version) and version_tuple(version)[:2] >= GPUS_VIA_CDI
    if via_cdi and shutil.which(CDI_HOOK, path=search):
        then = f", then {found} where that fails" if found else ""
        return ("ok", f"{name} --gpus: {daemon} {version} finds {CDI_HOOK}: --gpus takes CDI devices nvidia.com/gpu=ID "
                f"from the specs in its cdi-spec-dirs (gpuhook's: gpuhook cdi generate){then}")
    if via_cdi and found is None:
        return ("warn", f"{name} --gpus: no {HOOK} or {CDI_HOOK} on {daemon}'s PATH ({search}): {daemon} {version} "
                "takes --gpus as amd.com/gpu CDI devices where the specs hold only AMD GPUs, else fails with 'could "
                "not select device driver'", f"ln -s <gpuhook's bin>/{HOOK} /usr/local/bin/ (install.sh does) and "
                f"restart {daemon}")
    if found is None:
        return ("warn", f"{name} --gpus: no {HOOK} on {daemon}'s PATH ({search}): `{name} run --gpus` fails with "
                "'could not select device driver'", f"ln -s <gpuhook's bin>/{HOOK} /usr/local/bin/ (install.sh does) "
                f"and restart {daemon}")
    whose = "gpuhook's" if is_gpuhooks(found) else "NVIDIA's container toolkit's (gpuhook's hook is not used)"
    return ("ok", f"{name} --gpus: {daemon} runs {found}, {whose}")


def is_gpuhooks(path: str) -> bool:
    """Whether `path` leads to gpuhook's own executable: a gpuhook launcher (naming gpuhook's modules in its first
    bytes) or the self-contained build's launcher (file name gpuhook), as install.sh tells them. Reads 512 bytes."""
    real = os.path.realpath(path)
    if os.path.basename(real) in ("gpuhook", "gpuhook-hook"):  # the build's launcher; the native hook --gpus runs
        return True
    try:
        with open(real, "rb") as f:
            return b"gpuhook.cli." in f.read(512)
    except OSError:
        return False


def _daemon_path(program: str, proc: str, default: str = SYSTEMD_PATH) -> str:
    """The PATH of a running `program` (its environment), else `default` (the one systemd gives a unit)."""
    comm = program.encode()[:15]  # the kernel keeps 15 bytes of the name
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return default
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/comm", "rb") as f:
                if f.read(32).strip() != comm:
                    continue
            with open(f"{proc}/{pid}/environ", "rb") as f:
                env = f.read(1 << 16).split(b"\0")
        except OSError:
            continue
        for entry in env:
            if entry.startswith(b"PATH="):
                return entry[5:].decode(errors="replace")
        return SYSTEMD_PATH
    return default


def time_namespaces(runtime_text: str, search: str = SYSTEMD_PATH, version: Callable[[str], str] | None = None,
                    config: str | None = None) -> list[tuple[str, ...]]:
    """Where Docker runs containers through gpuhook's runtime: from Docker 29.5 every container's spec asks for a time
    namespace, which runc before 1.2 (`runtime_text`: the first line of gpuhook's runtime's --version) refuses, so
    that every container fails to start (`namespace {"time" ""} does not exist`), unless daemon.json turns the
    feature off. A failure with its fixes, or nothing. `version(program)` names a release (default: `PROGRAM
    --version`); `config`: daemon.json (default: the record's). Reads daemon.json (1 MiB at most); runs dockerd."""
    from gpuhook.engines.table import DOCKER
    from gpuhook.request.requirements import version_tuple

    release = runc_release(runtime_text)
    if release is None:
        return []
    runc = release.split("-")[0]
    program = shutil.which(DOCKER.program, path=search)
    if program is None or version_tuple(runc)[:2] >= RUNC_TIME_NAMESPACES:
        return []
    path = config or DOCKER.config_path
    text = _read(path)
    docker = (version or _version)(program)
    if not docker or version_tuple(docker)[:2] < TIME_NAMESPACES or not _mentions(text):
        return []
    from gpuhook import fastjson

    try:
        features = fastjson.loads(text or b"{}").get("features") or {}
    except (ValueError, RecursionError, AttributeError):
        features = {}  # the registration check says what is wrong with it
    if isinstance(features, dict) and features.get("time-namespaces") is False:
        return [("ok", f"docker {docker}: time namespaces are off in {path} (gpuhook's runtime is runc {runc})")]
    return [("fail", f"docker {docker} gives every container a time namespace, which gpuhook's runtime, runc {runc}, "
             f"refuses: containers run through gpuhook fail with 'namespace {{\"time\" \"\"}} does not exist'",
             'upgrade runc to 1.2 or later (or point `runtime` in the gpuhook config at one), or set "features": '
             f'{{"time-namespaces": false}} in {path} and restart docker')]


def runc_release(version_text: str) -> str | None:
    """The release `runc --version`'s first line names, without a packager's suffix ("1.1.5" of "runc version
    1.1.5+ds1", "1.2.0-rc.2" kept whole); None for another runtime's words."""
    words = version_text.split()
    if len(words) < 3 or words[:2] != ["runc", "version"]:
        return None
    return words[2].split("+")[0].split("~")[0]
