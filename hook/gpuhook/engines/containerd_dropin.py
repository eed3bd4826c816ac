"""containerd's drop-in registration: gpuhook's runtime in a file of its own (conf.d/99-gpuhook.toml beside
config.toml) that config.toml imports, as NVIDIA's container toolkit registers its runtime. Pure.

containerd reads only the `imports` its config file names (containerd 2.2 and later print
/etc/containerd/conf.d/*.toml in `containerd config default`, but a config.toml without the line imports nothing), so
configure adds one line to config.toml where none of its imports covers the drop-in: the one change to that file,
marked so that --revert takes exactly that line out. A config.toml that does not exist is created with a version
and that line (and removed again on revert).

containerd before 2.1 merges an imported file by plugin, replacing a plugin's whole section: a drop-in holding only
the gpuhook runtime would drop every other CRI setting (the sandbox image, the runc runtime). So the drop-in holds a
copy of config.toml's CRI runtime plugin section with the gpuhook runtime added (containerd.py's edit, CDI and the
default runtime as --in-place writes them); after editing that section in config.toml, run configure again.

What configure did to config.toml is the drop-in's second line (RECORD), read back by --revert: `line` (it added
the imports line), `appended PATTERN` (config.toml had imports of other files: PATTERN went at the end of them),
`created` (it created the file), `none` (an import covered the drop-in already).
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError

MARK = "# gpuhook configure containerd added this line; --revert removes it"
RECORD = "# gpuhook-imports: "
DEFAULT_NAME = "conf.d/99-gpuhook.toml"  # relative to config.toml's directory


def default_path(main: str) -> str:
    """Where the drop-in goes for the config file `main`: conf.d/99-gpuhook.toml beside it."""
    return os.path.join(os.path.dirname(os.path.abspath(main)), DEFAULT_NAME)


def pattern(drop_in: str) -> str:
    """The import that covers `drop_in`: every .toml file of its directory (what NVIDIA's toolkit adds too)."""
    return os.path.join(os.path.dirname(os.path.abspath(drop_in)), "*.toml")


def plan(main_text: str | None, main: str, drop_in: str, wanted: Wanted, old_drop_in: str | None) -> tuple[str, str]:
    """(config.toml's new text, the drop-in's text) registering `wanted` through `drop_in`; `main_text` None where
    config.toml does not exist; `old_drop_in` the drop-in as an earlier run left it (its record is kept).
    EngineConfigError for a config.toml that is not valid TOML or of a version containerd has no drop-ins for."""
    from gpuhook.engines.containerd import CRI, edit

    text = main_text or ""
    doc = _parse(text, main)
    version = int(doc.get("version", 1)) if text.strip() else 2
    if version not in CRI:
        raise EngineConfigError(f"{main} is containerd config version {version}, which gpuhook does not register "
                                "with: `containerd config migrate` converts it to version 2 or 3")
    earlier = record_of(old_drop_in or "")
    if covered(doc.get("imports", []), main, drop_in):
        record = earlier or "none"
        new_main = text
    elif main_text is None:
        record, new_main = "created", f"version = {version}  {MARK}\n{_line(drop_in)}"
    elif not text.strip():  # an empty file: containerd would read one with imports alone as version 1
        record, new_main = "line", f"{text}version = {version}  {MARK}\n{_line(drop_in)}"
    elif "imports" in doc:  # a line of its own that covers something else: gpuhook's pattern appended to it
        record, new_main = "appended " + pattern(drop_in), _imports_edited(doc, main, pattern(drop_in), add=True)
    else:
        record, new_main = "line", _insert(text, _line(drop_in))
    body = edit(_section(doc, version, CRI[version]), wanted)
    header = (f"# Written by `gpuhook configure containerd` for {main}, which imports it; --revert removes it.\n"
              f"{RECORD}{record}\n"
              f"# It holds a copy of {main}'s [plugins.\"{CRI[version]}\"] (containerd before 2.1 replaces a\n"
              "# plugin's whole section with an imported file's): run gpuhook configure containerd again after\n"
              "# editing that section there.\n")
    return new_main, header + body


def undo(main_text: str | None, drop_in_text: str) -> str | None:
    """config.toml's text without what configure added to it, by the drop-in's record; None where configure created
    the file and nothing else was written to it since (remove it)."""
    if main_text is None:
        return None
    record = record_of(drop_in_text)
    if record.startswith("appended "):
        return _imports_edited(_parse(main_text, "config.toml"), "config.toml", record.split(" ", 1)[1], add=False)
    kept = "".join(line for line in main_text.splitlines(keepends=True) if not line.rstrip("\n").endswith(MARK)
                   or not line.lstrip().startswith(("imports", "version")))
    if record == "created" and not kept.strip():
        return None
    return kept if record in ("line", "created") else main_text


def record_of(drop_in_text: str) -> str:
    """What configure did to config.toml, from the drop-in's record line ("" where there is none)."""
    for line in drop_in_text.splitlines()[:4]:
        if line.startswith(RECORD):
            return line[len(RECORD):].strip()
    return ""


def covered(imports: object, main: str, drop_in: str) -> bool:
    """Whether one of config.toml's `imports` (relative ones from config.toml's directory, globs as containerd
    matches them: `*` within one path element) names `drop_in`."""
    target = os.path.abspath(drop_in)
    base = os.path.dirname(os.path.abspath(main))
    for entry in imports if isinstance(imports, list) else []:
        path = os.path.normpath(os.path.join(base, str(entry)))
        if len(path.split("/")) == len(target.split("/")) and all(
                fnmatch.fnmatchcase(t, p) for t, p in zip(target.split("/"), path.split("/"), strict=True)):
            return True
    return False


def imports_of(main_text: str, main: str) -> list[str]:
    """config.toml's imports as absolute globs (relative ones from its directory, as containerd resolves them); []
    where it has none or is not TOML. For doctor."""
    try:
        found = _parse(main_text, main).get("imports", [])
    except EngineConfigError:
        return []
    base = os.path.dirname(os.path.abspath(main))
    return [os.path.normpath(os.path.join(base, str(x))) for x in found] if isinstance(found, list) else []


def _parse(text: str, main: str) -> Any:
    import tomlkit

    try:
        return tomlkit.parse(text)
    except Exception as e:  # tomlkit raises several parse error types
        raise EngineConfigError(f"{main} is not valid TOML ({e}): fix it, then run gpuhook configure containerd "
                                "again") from e


def _imports_edited(doc: Any, main: str, entry: str, add: bool) -> str:
    """config.toml's text with `entry` appended to (add) or taken out of its imports array, the rest as it was."""
    import tomlkit

    imports = doc.get("imports")
    if not isinstance(imports, list):
        raise EngineConfigError(f"{main}: imports is not a list of files: fix it, or use --in-place")
    if add and entry not in imports:
        imports.append(entry)
    while not add and entry in imports:
        imports.remove(entry)
    return tomlkit.dumps(doc)


def _line(drop_in: str) -> str:
    return f'imports = ["{pattern(drop_in)}"]  {MARK}\n'


def _insert(text: str, line: str) -> str:
    """`text` with `line` after its top-level `version = N` line (before the first table), else first."""
    lines = text.splitlines(keepends=True)
    at = 0
    for i, current in enumerate(lines):
        stripped = current.strip()
        if stripped.startswith("["):
            break
        if stripped.split("=", 1)[0].strip() == "version" and "=" in stripped:
            at = i + 1
            break
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join([*lines[:at], line, *lines[at:]])


def _section(doc: Any, version: int, plugin: str) -> str:
    """A config of `version` holding only config.toml's section of `plugin` (empty where it has none)."""
    import tomlkit

    out = tomlkit.document()
    out["version"] = version
    plugins = doc.get("plugins")
    if isinstance(plugins, dict) and plugin in plugins:
        table = tomlkit.table(is_super_table=True)
        table[plugin] = plugins[plugin]
        out["plugins"] = table
    return tomlkit.dumps(out)
