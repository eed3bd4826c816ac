"""Write fast, isolated launchers for gpuhook's entry points: `python -I -S` plus an explicit sys.path, and
build the native front ends beside them.

pip's console-script wrappers start Python with site processing and import `re`; in front of every
container that is a third of the shim's cost. `-I` also keeps PYTHON* variables away from a root process.
The native front ends (cli/native/) take Python off the pass-through path, hand GPU calls to the warm
helper, and refresh the linker cache in one process; `NATIVE_SOURCES` (written beside them) holds the digest
of the sources they were built from, so `gpuhook doctor` can tell a missing or stale build.

Usage: python -m gpuhook.cli.launcher [--require-native | --no-native] DEST_DIR [SYS_PATH_ENTRY ...]
(default path: where gpuhook is installed). --require-native: a front end that does not build is an error
(exit 1, one line); --no-native: none is built and earlier builds in DEST_DIR are removed (the Python paths serve).
The self-contained build (packaging/build-bundle.sh) builds the same sources static, and its Python entry points
from ENTRIES.
"""

from __future__ import annotations

import os
import sys

from gpuhook.atomic import write_text
from gpuhook.errors import one_line

ENTRIES = {"gpuhook": "gpuhook.cli.admin", "gpuhook-runtime": "gpuhook.cli.shim",
           "gpuhook-runtime-py": "gpuhook.cli.shim",
           "nvidia-container-runtime-hook": "gpuhook.cli.nvidia_hook",  # Docker's --gpus runs it (cli/nvidia_hook.py)
           "nvidia-container-runtime-hook-py": "gpuhook.cli.nvidia_hook"}  # its direct path behind the native one
GPUS_HOOK = "nvidia-container-runtime-hook"  # a link to gpuhook-hook where that was built (native/hook.c)
# source -> (installed name, what it is); each built with the config cache's directory compiled in
NATIVE = {"runtime.c": ("gpuhook-runtime", "the runtime's native front end (pass-through without Python)"),
          "createhook.c": ("gpuhook-createhook", "the native createContainer hook (procfs copies, linker cache)"),
          "hook.c": ("gpuhook-hook", "the hooks' native front end (the warm helper's way in)")}
NATIVE_SOURCES = ".native-sources"  # beside the binaries: the digest of the sources they were built from


class NativeBuildError(Exception):
    """A native front end did not build where one was required."""


def write_launchers(dest: str, python: str, path_entries: list[str], native: str = "try") -> dict[str, str]:
    """Write one launcher per entry point into `dest` (atomically) and the native front ends (`native`: "try",
    "require" or "none"); return name -> path. Writes files; NativeBuildError when a required build fails."""
    written = {}
    for name, module in ENTRIES.items():
        target = os.path.join(dest, name)
        if os.path.islink(target):
            os.unlink(target)  # an earlier install's link: the atomic writer replaces files, never links
        write_text(target, f"#!{python} -IS\nimport sys\nsys.path[:0] = {path_entries!r}\n"
                           f"from {module} import main\nsys.exit(main())\n", mode=0o755)
        os.chmod(target, 0o755)
        written[name] = target
    if native == "none":
        for name, _ in NATIVE.values():
            if name != "gpuhook-runtime" and os.path.lexists(os.path.join(dest, name)):
                os.unlink(os.path.join(dest, name))  # an earlier build: the Python paths serve now
        if os.path.lexists(os.path.join(dest, NATIVE_SOURCES)):
            os.unlink(os.path.join(dest, NATIVE_SOURCES))
        return written
    built = build_all(dest, required=native == "require")
    written.update(built)
    if "gpuhook-hook" in built:  # Docker's --gpus hook goes the native way too (the warm helper, else -py)
        link = os.path.join(dest, GPUS_HOOK)
        os.unlink(link)
        os.symlink("gpuhook-hook", link)
        written[GPUS_HOOK] = link
    return written


def build_all(dest: str, required: bool = False) -> dict[str, str]:
    """Build every native front end into `dest` and record their sources' digest; name -> path of those built.
    Writes files; NativeBuildError (naming the first failure) when `required` and one did not build."""
    from gpuhook.configfile import CACHE_DIR

    built = {}
    for source, (name, what) in NATIVE.items():
        try:
            built[name] = build_native(dest, source, name, f'-DCACHE_DIR="{CACHE_DIR}"')
        except NativeBuildError as e:
            if required:
                raise
            print(f"gpuhook: {what} was not built ({e}); the Python path serves instead", file=sys.stderr)
    stamp = os.path.join(dest, NATIVE_SOURCES)
    if len(built) == len(NATIVE):
        write_text(stamp, sources_digest() + "\n", mode=0o644)
    elif os.path.lexists(stamp):
        os.unlink(stamp)  # a partial build is no build of these sources
    return built


def native_dir() -> str:
    """Where the native front ends' sources are (in the package, in the checkout or in the frozen binary)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")


def sources_digest() -> str:
    """sha256 over every file of native/ (name and bytes, in name order): what a build was made from. Reads files."""
    import hashlib

    digest = hashlib.sha256()
    folder = native_dir()
    for name in sorted(os.listdir(folder)):
        if name.endswith((".c", ".h")):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def build_native(dest: str, source: str, name: str, *flags: str) -> str:
    """Compile native/`source` into dest/`name`; its path. Writes a file; NativeBuildError (one line: no C
    compiler, a missing header, ...) when it does not build."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise NativeBuildError("no C compiler (cc or gcc) on PATH: apt-get install gcc libc6-dev")
    path = os.path.join(native_dir(), source)
    target = os.path.join(dest, name)
    tmp = f"{target}.tmp{os.getpid()}"
    done = subprocess.run([cc, "-O2", "-o", tmp, path, *flags], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines() or [
            f"{cc} exited {done.returncode}"]
        raise NativeBuildError(f"{source} did not build: {one_line(errors[0])}")
    os.replace(tmp, target)
    return target


def main() -> int:
    """`python -m gpuhook.cli.launcher [--require-native | --no-native] DEST_DIR [SYS_PATH_ENTRY ...]`."""
    argv = sys.argv[1:]
    native = "try"
    modes = {"--require-native": "require", "--no-native": "none"}
    if argv and argv[0] in modes:
        native = modes[argv.pop(0)]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    entries = argv[1:] or [here]
    try:
        written = write_launchers(argv[0], sys.executable, entries, native)
    except NativeBuildError as e:
        print(f"gpuhook: the native front ends did not build: {e} (or install.sh --no-native: every container "
              "then starts Python)", file=sys.stderr)
        return 1
    for path in written.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
