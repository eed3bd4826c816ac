"""`gpuhook doctor`'s engine checks: which installed engines have gpuhook registered (an engine whose config file
is absent has not), and which nvidia-container-runtime-hook dockerd finds for `docker run --gpus`. Each finding
is (level, what[, fix])."""

from __future__ import annotations

import os
import shutil

from gpuhook.engines import registration

BINARIES = {"docker": "dockerd", "containerd": "containerd", "crio": "crio", "podman": "podman"}
HOOK = "nvidia-container-runtime-hook"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a unit's PATH unless it sets one


def checks(paths: dict[str, str] | None = None, proc: str = "/proc",
           search: str = SYSTEMD_PATH) -> list[tuple[str, ...]]:
    """Registration per installed engine (found on `search`), and Docker's --gpus hook. Reads the engines' config
    files and /proc."""
    out: list[tuple[str, ...]] = []
    paths = registration.DEFAULT_PATHS if paths is None else paths
    for engine, path in paths.items():
        installed = shutil.which(BINARIES[engine], path=search) is not None
        try:
            with open(path, "rb") as f:
                text = f.read(1 << 20)
            registered = b"gpuhook" in text
        except OSError:
            if installed:
                out.append(("warn", f"{engine}: {BINARIES[engine]} is installed but {path} is absent: gpuhook is not "
                            "registered", f"gpuhook configure {engine}"))
            continue
        if engine == "crio" and b"allowed_annotations" in text and b"gpuhook.dev/" in text:
            out.append(("fail", f"crio: {path} lists gpuhook.dev/ keys in allowed_annotations (written by an "
                        "earlier gpuhook): CRI-O takes only its own keys there and ignores the whole gpuhook handler",
                        "gpuhook configure crio, then restart CRI-O"))
            continue
        out.append(("ok", f"{engine}: gpuhook registered in {path}") if registered else
                   ("warn", f"{engine}: gpuhook not registered in {path}", f"gpuhook configure {engine}"))
    if "docker" in paths and shutil.which("dockerd", path=search):
        out.append(gpus_hook(_dockerd_path(proc, search)))
    return out


def gpus_hook(search: str) -> tuple[str, ...]:
    """Whose nvidia-container-runtime-hook dockerd finds on `search` (its PATH): gpuhook's, NVIDIA's, or none."""
    found = shutil.which(HOOK, path=search)
    if found is None:
        return ("warn", f"docker --gpus: no {HOOK} on dockerd's PATH ({search}): `docker run --gpus` fails with "
                "'could not select device driver'", f"ln -s <gpuhook's bin>/{HOOK} /usr/local/bin/ (install.sh does) "
                "and restart dockerd")
    whose = "gpuhook's" if is_gpuhooks(found) else "NVIDIA's container toolkit's (gpuhook's hook is not used)"
    return ("ok", f"docker --gpus: dockerd runs {found}, {whose}")


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


def _dockerd_path(proc: str, default: str = SYSTEMD_PATH) -> str:
    """The PATH of a running dockerd (its environment), else `default` (the one systemd gives a unit)."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return default
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/comm", "rb") as f:
                if f.read(32).strip() != b"dockerd":
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
