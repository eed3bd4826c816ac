"""`gpuhook doctor`'s engine checks, over the engines' records (engines/table.py): which installed engines have
gpuhook registered (an engine whose config file is absent has not), and which nvidia-container-runtime-hook the
daemon finds for `--gpus` where an engine's `--gpus` runs one (`docker run --gpus`). Each finding is
(level, what[, fix])."""

from __future__ import annotations

import os
import shutil

from gpuhook.engines.table import all_engines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.engines.engine import Engine

HOOK = "nvidia-container-runtime-hook"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a unit's PATH unless it sets one


def checks(paths: dict[str, str] | None = None, proc: str = "/proc",
           search: str = SYSTEMD_PATH) -> list[tuple[str, ...]]:
    """Registration per installed engine (its program found on `search`) in its config file (`paths`: engine name
    -> another file, and only those engines), and the --gpus hook of each engine that has one. Reads the engines'
    config files and /proc."""
    out: list[tuple[str, ...]] = []
    engines = [e for e in all_engines() if paths is None or e.name in paths]
    for engine in engines:
        path = engine.config_path if paths is None else paths[engine.name]
        out += _registration(engine, path, shutil.which(engine.program, path=search) is not None)
    for engine in engines:
        if engine.gpus_hook and shutil.which(engine.program, path=search):
            out.append(gpus_hook(engine, _daemon_path(engine.program, proc, search)))
    return out


def _registration(engine: Engine, path: str, installed: bool) -> list[tuple[str, ...]]:
    """Whether `path` registers gpuhook with `engine` (nothing to say where it is absent and the engine is not
    installed). Reads `path` (1 MiB at most)."""
    name = engine.name
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return [("warn", f"{name}: {engine.program} is installed but {path} is absent: gpuhook is not registered",
                 f"gpuhook configure {name}")] if installed else []
    ignored = engine.audit(path, text) if engine.audit is not None else None
    if ignored is not None:
        return [("fail", f"{name}: {ignored[0]}", ignored[1])]
    return [("ok", f"{name}: gpuhook registered in {path}") if b"gpuhook" in text else
            ("warn", f"{name}: gpuhook not registered in {path}", f"gpuhook configure {name}")]


def gpus_hook(engine: Engine, search: str) -> tuple[str, ...]:
    """Whose nvidia-container-runtime-hook `engine`'s daemon finds on `search` (its PATH) for `--gpus`: gpuhook's,
    NVIDIA's, or none."""
    name, daemon = engine.name, engine.program
    found = shutil.which(HOOK, path=search)
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
