"""Build the simulator's stub ELF libraries and tools with the host C compiler (or $GPUHOOK_STUB_CC: a
cross compiler, for a build of another architecture), cached by content."""

from __future__ import annotations

import hashlib
import os
import shutil
from importlib import resources

from gpuhook.errors import SimulatorError
from gpuhook.proc import run


def cache_dir() -> str:
    """Where compiled stubs are kept between runs ($GPUHOOK_STUB_CACHE, else the XDG cache)."""
    env = os.environ.get("GPUHOOK_STUB_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuhook", "stubs")


def amdsmi_symbols() -> list[str]:
    """Every libamd_smi symbol the installed amdsmi package binds when it is imported: the amdsmi_* names in
    its wrapper's code, asked of the import system's finders (a source file, or a frozen app's archive)
    without importing it (that needs the very library the stub stands in for)."""
    import importlib.util
    import sys

    parent = importlib.util.find_spec("amdsmi")
    if parent is None or not parent.submodule_search_locations:
        raise SimulatorError("the amdsmi package is not installed: pip install amdsmi")
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find("amdsmi.amdsmi_wrapper", parent.submodule_search_locations) if find else None
        code = spec.loader.get_code("amdsmi.amdsmi_wrapper") if spec and spec.loader else None
        if code is not None:
            return sorted(n for n in code.co_names if n.startswith("amdsmi_"))
    raise SimulatorError("cannot read the amdsmi package's wrapper to list the symbols it binds")


def build(source: str, out_name: str, *, soname: str | None = None, defines: dict[str, str] | None = None,
          libs: tuple[str, ...] = (), extra_code: str = "") -> str:
    """Compile stubs/`source` (plus `extra_code`) into a shared library (with `soname`) or an executable;
    return its cached path."""
    here = resources.files("gpuhook.simulator.stubs")
    code = here.joinpath(source).read_text() + extra_code
    header = here.joinpath("stub_state.h").read_text()  # included by the stateful stubs; part of the cache key
    flags = [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
    if soname:
        flags += ["-shared", "-fPIC", f"-Wl,-soname,{soname}"]
    cross = os.environ.get("GPUHOOK_STUB_CC", "")  # another architecture's stubs are cached apart
    key = hashlib.sha256("\0".join([code, header, out_name, *flags, *libs, cross]).encode()).hexdigest()[:16]
    out = os.path.join(cache_dir(), key, out_name)
    if os.path.exists(out):
        return out
    cc = cross or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SimulatorError("the simulator needs a C compiler to build stub libraries: apt-get install gcc "
                             "libc6-dev (or dnf install gcc), or name one in GPUHOOK_STUB_CC")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    src = out + ".c"
    with open(src, "w") as f:
        f.write(code)
    tmp = f"{out}.tmp{os.getpid()}"
    run([cc, "-O1", "-o", tmp, src, f"-I{os.path.dirname(str(here.joinpath(source)))}", *flags, *libs])
    os.replace(tmp, out)
    return out
