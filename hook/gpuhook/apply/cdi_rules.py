"""A CDI spec as an engine's parser reads it: the container-device-interface library at a given version, whose
errors the engines hide (Podman 4.3 says only `unresolvable CDI devices amd.com/gpu=0`). Pure.

What the library does, by its version (pkg/cdi, specs-go):
- decodes strictly (sigs.k8s.io/yaml UnmarshalStrict): a field its structs lack is an error, field names matched
  case-insensitively as Go's encoding/json does; the first such error ends the parse;
- takes the released cdiVersions up to its own (0.5.x: 0.1.0-0.5.0), and from 0.5.4 on also refuses a cdiVersion
  lower than the fields need (hostPath and digit-led device names 0.5.0, annotations 0.6.0, additionalGids 0.7.0);
- checks the kind (vendor.tld/class), device names (a leading digit from 0.5), the edits (env K=V, device types
  and permissions, hook names, mount paths), duplicate devices, and from 1.0 a spec with no devices.
"""

from __future__ import annotations

from gpuhook.apply.cdi_readers import SPEC_VERSIONS, highest_for
from gpuhook.request.requirements import version_tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# object -> field -> (JSON shape, the spec version that added it); shapes: str int uint bool map strs uints,
# "<Object>" one object, "[<Object>]" a list of them
_0 = "0.1.0"  # there from the first spec version
_SHAPES: dict[str, dict[str, tuple[str, str]]] = {
    "Spec": {"cdiVersion": ("str", _0), "kind": ("str", _0), "devices": ("[Device]", _0),
             "containerEdits": ("ContainerEdits", _0), "annotations": ("map", "0.6.0")},
    "Device": {"name": ("str", _0), "containerEdits": ("ContainerEdits", _0), "annotations": ("map", "0.6.0")},
    "ContainerEdits": {"env": ("strs", _0), "deviceNodes": ("[DeviceNode]", _0), "hooks": ("[Hook]", _0),
                       "mounts": ("[Mount]", _0), "intelRdt": ("object", "0.7.0"),
                       "additionalGids": ("uints", "0.7.0"), "netDevices": ("[object]", "1.1.0")},
    "DeviceNode": {"path": ("str", _0), "hostPath": ("str", "0.5.0"), "type": ("str", _0), "major": ("int", _0),
                   "minor": ("int", _0), "fileMode": ("uint", _0), "permissions": ("str", _0), "uid": ("uint", _0),
                   "gid": ("uint", _0)},
    "Mount": {"hostPath": ("str", _0), "containerPath": ("str", _0), "options": ("strs", _0), "type": ("str", "0.4.0")},
    "Hook": {"hookName": ("str", _0), "path": ("str", _0), "args": ("strs", _0), "env": ("strs", _0),
             "timeout": ("int", _0)},
}
HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


def problems(spec: object, library: str) -> list[str]:
    """What container-device-interface `library` (e.g. 0.5.2) refuses in a parsed spec, first the decoding errors
    (unknown fields, wrong types: the parse stops at the first), then the checks; [] when it takes the spec."""
    highest = highest_for(library)
    if not isinstance(spec, dict):
        return ["the file holds no CDI spec (not a JSON or YAML object)"]
    found = _decode(spec, "Spec", "", highest)
    if found:
        return found
    version = str(spec.get("cdiVersion") or "")
    known = [v for v in SPEC_VERSIONS if version_tuple(v) <= version_tuple(highest)]
    needed = required_version(spec)
    if version not in known:
        found.append(f"cdiVersion {version!r} is not one it knows ({known[0]} to {known[-1]})")
    elif version_tuple(library) >= (0, 5, 4) and version_tuple(needed) > version_tuple(version):
        found.append(f"cdiVersion {version} is lower than its fields need: {needed} ({_why(spec, needed)})")
    found += _kind(str(spec.get("kind") or ""), highest)
    found += _edits(spec.get("containerEdits") or {}, "containerEdits")
    names: set[str] = set()
    for i, device in enumerate(d or {} for d in spec.get("devices") or []):
        name = str(device.get("name") or "")
        found += [f"device {name!r}: {p}" for p in _device_name(name, highest)]
        if name in names:
            found.append(f"device {name!r} is there twice")
        names.add(name)
        edits = device.get("containerEdits") or {}
        if not any(edits.get(k) for k in _SHAPES["ContainerEdits"]):
            found.append(f"device {name!r} has no edits")
        found += _edits(edits, f"devices[{i}].containerEdits")
    if not names and version_tuple(library) >= (1, 0):
        found.append("the spec has no devices")
    return found


def required_version(spec: dict[str, Any]) -> str:
    """The lowest cdiVersion a spec's fields need (what the libraries from 0.5.4 on insist on)."""
    return next((v for v, _ in reversed(_NEEDS) if _why(spec, v)), "0.3.0")


def _why(spec: dict[str, Any], version: str) -> str:
    """The fields of `spec` that need cdiVersion `version`, in words ("" for none)."""
    return next((test(spec) for v, test in _NEEDS if v == version), "")


def _all_edits(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec.get("containerEdits") or {},
            *(((d or {}).get("containerEdits") or {}) for d in spec.get("devices") or [])]


def _needs_070(spec: dict[str, Any]) -> str:
    return "additionalGids" if any(e.get("additionalGids") for e in _all_edits(spec)) else \
        "intelRdt" if any(e.get("intelRdt") for e in _all_edits(spec)) else ""


def _needs_060(spec: dict[str, Any]) -> str:
    if spec.get("annotations") or any((d or {}).get("annotations") for d in spec.get("devices") or []):
        return "annotations"
    return "a '.' in the kind's class" if "." in str(spec.get("kind", "")).partition("/")[2] else ""


def _needs_050(spec: dict[str, Any]) -> str:
    if any(n.get("hostPath") for e in _all_edits(spec) for n in e.get("deviceNodes") or []):
        return "deviceNodes with hostPath"
    return "device names that start with a digit" if any(
        str((d or {}).get("name") or "")[:1].isdigit() for d in spec.get("devices") or []) else ""


def _needs_040(spec: dict[str, Any]) -> str:
    return "a mount type" if any(m.get("type") for e in _all_edits(spec) for m in e.get("mounts") or []) else ""


def _needs_110(spec: dict[str, Any]) -> str:
    return "netDevices" if any(e.get("netDevices") for e in _all_edits(spec)) else ""


_NEEDS = (("0.4.0", _needs_040), ("0.5.0", _needs_050), ("0.6.0", _needs_060), ("0.7.0", _needs_070),
          ("1.1.0", _needs_110))


def _decode(value: object, shape: str, where: str, highest: str) -> list[str]:
    """Go's strict decoding of `value` into `shape` at path `where`: the first error, as a one-item list."""
    if value is None:
        return []  # null is the zero value
    if shape.startswith("["):
        if not isinstance(value, list):
            return [f"{where or 'the spec'}: expected a list, not {_kind_of(value)}"]
        return next((e for i, item in enumerate(value) if (e := _decode(item, shape[1:-1], f"{where}[{i}]", highest))),
                    [])
    if shape in _SHAPES or shape == "object":
        if not isinstance(value, dict):
            return [f"{where or 'the spec'}: expected an object, not {_kind_of(value)}"]
        fields = {k.lower(): (k, s, since) for k, (s, since) in _SHAPES.get(shape, {}).items()}
        for key, item in value.items():
            known = fields.get(str(key).lower())
            if shape != "object" and (known is None or version_tuple(known[2]) > version_tuple(highest)):
                later = f" (a cdiVersion {known[2]} field, which newer engines read)" if known else ""
                return [f'unknown field "{key}" in {where or "the spec"}{later}']
            if known and (e := _decode(item, known[1], f"{where}.{known[0]}".lstrip("."), highest)):
                return e
        return []
    return [] if _fits(shape, value) else [f"{where}: {_kind_of(value)} where it takes {_NAMES[shape]}"]


def _fits(shape: str, value: object) -> bool:
    """Whether a JSON value decodes into a Go field of `shape`."""
    def number(v: object, unsigned: bool = False) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and (not unsigned or 0 <= v < 1 << 32)

    if shape in ("strs", "uints"):
        return isinstance(value, list) and all(isinstance(x, str) if shape == "strs" else number(x, True)
                                               for x in value)
    if shape == "map":
        return isinstance(value, dict) and all(isinstance(x, str) for x in value.values())
    return {"str": isinstance(value, str), "bool": isinstance(value, bool), "int": number(value),
            "uint": number(value, True)}[shape]


_NAMES = {"str": "a string", "bool": "true or false", "int": "a number", "uint": "a number from 0 to 2^32-1",
          "map": "an object of strings", "strs": "a list of strings", "uints": "a list of numbers from 0 to 2^32-1"}


def _kind_of(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), "null")


def _kind(kind: str, highest: str) -> list[str]:
    vendor, slash, cls = kind.partition("/")
    if not slash or not vendor or not cls:
        return [f"kind {kind!r} is not vendor.tld/class (e.g. amd.com/gpu)"]
    out = [p for p in (_name_rule(vendor, "_-.", letter_first=True),) if p]
    out += [p for p in (_name_rule(cls, "_-." if version_tuple(highest) >= (0, 6) else "_-", letter_first=True),) if p]
    return [f"kind {kind!r}: {p}" for p in out]


def _device_name(name: str, highest: str) -> list[str]:
    problem = _name_rule(name, "_-.:", letter_first=version_tuple(highest) < (0, 5))
    return [problem] if problem else []


def _name_rule(name: str, inner: str, letter_first: bool) -> str:
    """CDI's name rule: a letter (or, where allowed, a digit) first, letters, digits and `inner` between, and a
    letter or digit last; "" when `name` keeps it."""
    def alnum(c: str) -> bool:
        return c.isascii() and c.isalnum()

    if not name:
        return "empty name"
    if not (name[0].isascii() and name[0].isalpha()) and (letter_first or not alnum(name[0])):
        return f"{name!r} must start with a letter" + ("" if letter_first else " or a digit")
    bad = next((c for c in name[1:-1] if not alnum(c) and c not in inner), None)
    if bad:
        return f"{name!r} has {bad!r}, which CDI names may not hold"
    return "" if len(name) == 1 or alnum(name[-1]) else f"{name!r} must end with a letter or a digit"


def _edits(edits: dict[str, Any], where: str) -> list[str]:
    out = [f"{where}.env: {e!r} is not NAME=value" for e in edits.get("env") or [] if e.find("=") <= 0]
    for node in edits.get("deviceNodes") or []:
        if not node.get("path"):
            out.append(f"{where}.deviceNodes: a node without a path")
        if node.get("type", "") not in ("", "b", "c", "u", "p"):
            out.append(f"{where}.deviceNodes: {node.get('path')!r} has type {node.get('type')!r} (b, c, u or p)")
        if set(node.get("permissions", "")) - set("rwm"):
            out.append(f"{where}.deviceNodes: {node.get('path')!r} has permissions {node.get('permissions')!r}")
    for hook in edits.get("hooks") or []:
        if hook.get("hookName") not in HOOK_NAMES:
            out.append(f"{where}.hooks: hook name {hook.get('hookName')!r} is not one of {', '.join(HOOK_NAMES)}")
        if not hook.get("path"):
            out.append(f"{where}.hooks: a {hook.get('hookName')} hook without a path")
        out += [f"{where}.hooks: env {e!r} is not NAME=value" for e in hook.get("env") or [] if e.find("=") <= 0]
    for mount in edits.get("mounts") or []:
        if not mount.get("hostPath") or not mount.get("containerPath"):
            out.append(f"{where}.mounts: a mount without its hostPath or containerPath")
    return out
