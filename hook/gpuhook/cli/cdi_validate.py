"""`gpuhook cdi validate [FILE...]`: CDI specs parsed the way the installed engines parse them, with the errors
they keep to their debug logs (Podman 4.3 reports `unresolvable CDI devices amd.com/gpu=0` for a spec it refused
over `unknown field "additionalGids"`), the host files a spec names that are missing, and device names two specs
define at the same priority (then the engines drop the device). Exit 0 when every engine takes every spec."""

from __future__ import annotations

import os
import stat
import sys

from gpuhook.apply.cdi_readers import LATEST_LIBRARY, Reader
from gpuhook.apply.cdi_rules import problems
from gpuhook.cli import cdi_files
from gpuhook.cli.cdi_files import installed_readers, read_spec, spec_files
from gpuhook.errors import CdiError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def validate(args: argparse.Namespace) -> int:
    """Check each spec against each installed CDI consumer's parser (or the latest CDI rules without one) and the
    host. Reads files; runs the engines' `--version`."""
    readers = [r for r in installed_readers(args.engine) if r.library]
    judges = readers or [Reader("the CDI specification", LATEST_LIBRARY, LATEST_LIBRARY)]
    if not readers:
        print(f"gpuhook cdi: no installed engine reads CDI specs; checking against CDI {LATEST_LIBRARY}'s rules")
    files = args.files or spec_files()
    if not files:
        print(f"no CDI specs in {' or '.join(cdi_files.SPEC_DIRS)}")
        return 0
    bad = 0
    defined: dict[tuple[str, str], str] = {}  # (directory, kind=name) -> the spec file defining it
    for path in files:
        try:
            spec = read_spec(path)
        except CdiError as e:
            print(f"fail  {e}")
            bad += 1
            continue
        found = [f"{j.label} refuses it: {p}" for j in judges for p in problems(spec, j.library)]
        found += [f"the host has no {what} {where}" for what, where in missing_on_host(spec)]
        found += _conflicts(spec, path, defined)
        for line in found:
            print(f"fail  {path}: {line}")
        if not found:
            names = _names(spec)
            shown = ", ".join(names[:6]) + (f", … ({len(names)} devices)" if len(names) > 6 else "")
            print(f"ok    {path}: {shown} (cdiVersion {spec.get('cdiVersion')}; taken by "
                  f"{', '.join(j.label for j in judges)})")
        bad += bool(found)
    if bad:
        print(f"gpuhook cdi validate: {bad} of {len(files)} specs have problems (where an engine refuses a spec, "
              "it reports only that its devices are unresolvable)", file=sys.stderr)
    return 1 if bad else 0


def missing_on_host(spec: Any) -> list[tuple[str, str]]:
    """(what, path) of the host files a spec names that are not there: device nodes (hostPath, else path) that are
    no device, mount sources, hook programs. Reads the host."""
    if not isinstance(spec, dict):
        return []
    edits = [spec.get("containerEdits") or {}, *(((d or {}).get("containerEdits") or {})
                                                 for d in spec.get("devices") or [] if isinstance(d, dict))]
    out: list[tuple[str, str]] = []
    for e in edits:
        for node in e.get("deviceNodes") or []:
            path = node.get("hostPath") or node.get("path") or ""
            if path and not _is_device(path):
                out.append(("device node", path))
        out += [("mount source", m.get("hostPath", "")) for m in e.get("mounts") or []
                if m.get("hostPath") and not os.path.exists(m["hostPath"])]
        out += [("hook program", h.get("path", "")) for h in e.get("hooks") or []
                if h.get("path") and not os.access(h["path"], os.X_OK)]
    return list(dict.fromkeys(out))


def _is_device(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def _names(spec: Any) -> list[str]:
    kind = spec.get("kind", "") if isinstance(spec, dict) else ""
    return [f"{kind}={d.get('name')}" for d in (spec.get("devices") or []) if isinstance(d, dict)]


def _conflicts(spec: Any, path: str, defined: dict[tuple[str, str], str]) -> list[str]:
    """Devices another spec in the same engine spec directory defines too: the engines resolve neither."""
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in {os.path.abspath(d) for d in cdi_files.SPEC_DIRS}:
        return []  # engines do not read it: nothing conflicts there
    clashes: dict[str, list[str]] = {}
    for name in _names(spec):
        other = defined.setdefault((directory, name), path)
        if other != path:
            clashes.setdefault(other, []).append(name)
    return [f"{other} defines {', '.join(names[:3])}{', …' if len(names) > 3 else ''} too: engines drop a device "
            "two specs of one directory define" for other, names in clashes.items()]
