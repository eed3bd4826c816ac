"""Write fast, isolated launchers for gpuhook's entry points: `python -I -S` plus an explicit sys.path.

pip's console-script wrappers start Python with site processing and import `re`; in front of every
container that is a third of the shim's cost. `-I` also keeps PYTHON* variables away from a root process.
Usage: python -m gpuhook.cli.launcher DEST_DIR [SYS_PATH_ENTRY ...]  (default: where gpuhook is installed).
"""

from __future__ import annotations

import os
import sys

from gpuhook.atomic import write_text

ENTRIES = {"gpuhook": "gpuhook.cli.admin", "gpuhook-runtime": "gpuhook.cli.shim",
           "gpuhook-runtime-py": "gpuhook.cli.shim",
           "nvidia-container-runtime-hook": "gpuhook.cli.nvidia_hook"}  # Docker's --gpus runs it (cli/nvidia_hook.py)


def write_launchers(dest: str, python: str, path_entries: list[str]) -> dict[str, str]:
    """Write one launcher per entry point into `dest` (atomically); return name -> path. Writes files."""
    written = {}
    for name, module in ENTRIES.items():
        target = os.path.join(dest, name)
        if os.path.islink(target):
            os.unlink(target)  # an earlier install's link: the atomic writer replaces files, never links
        write_text(target, f"#!{python} -IS\nimport sys\nsys.path[:0] = {path_entries!r}\n"
                           f"from {module} import main\nsys.exit(main())\n", mode=0o755)
        os.chmod(target, 0o755)
        written[name] = target
    native = build_front_end(dest)
    if native:
        written["gpuhook-runtime"] = native
    from gpuhook.configfile import CACHE_DIR

    for source, name, what in (("createhook.c", "gpuhook-createhook", "the createContainer hook"),
                               ("hook.c", "gpuhook-hook", "the hook's front end")):
        helper = build_native(dest, source, name, what, f'-DCACHE_DIR="{CACHE_DIR}"')
        if helper:
            written[name] = helper
    return written


def beside(here: str, name: str, fallback: str = "") -> str:
    """The native `name` in `here` where it was built, else `fallback` (the Python path that does its work)."""
    path = os.path.join(here, name)
    return path if os.access(path, os.X_OK) else fallback


def build_front_end(dest: str) -> str | None:
    """Compile the native pass-through front end into dest/gpuhook-runtime (the Python shim stays as
    gpuhook-runtime-py beside it); None, leaving the Python launcher in place, without a C compiler."""
    from gpuhook.configfile import CACHE_DIR

    return build_native(dest, "runtime.c", "gpuhook-runtime", "the native front end", f'-DCACHE_DIR="{CACHE_DIR}"')


def build_native(dest: str, source: str, name: str, what: str, *flags: str) -> str | None:
    """Compile native/`source` into dest/`name`; None without a C compiler or when it does not build (gpuhook
    then uses its Python path for it). Writes a file."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native", source)
    target = os.path.join(dest, name)
    tmp = f"{target}.tmp{os.getpid()}"
    done = subprocess.run([cc, "-O2", "-o", tmp, path, *flags], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if done.returncode != 0:
        print(f"gpuhook: {what} did not build ({done.stderr.strip()}); using Python", file=sys.stderr)
        return None
    os.replace(tmp, target)
    return target


def main() -> int:
    """`python -m gpuhook.cli.launcher DEST_DIR [SYS_PATH_ENTRY ...]`."""
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    entries = sys.argv[2:] or [here]
    for path in write_launchers(sys.argv[1], sys.executable, entries).values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
