"""`gpuhook cdi generate` and `gpuhook cdi list` (`cdi validate`: cdi_validate.py)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

from gpuhook.apply.cdi import build, to_yaml
from gpuhook.atomic import write_text
from gpuhook.cli.cdi_files import SPEC_DIRS
from gpuhook.config import load
from gpuhook.configfile import config_path
from gpuhook.errors import CdiError
from gpuhook.host.root import Root
from gpuhook.proc import beside
from gpuhook.request.container import CAPABILITIES
from gpuhook.vendors.discover import discover, identified
from gpuhook.vendors.registry import all_vendors


def generate(args: argparse.Namespace) -> int:
    """`gpuhook cdi generate`: one spec per vendor, or the one asked, in the cdiVersion the installed CDI consumers
    parse; with --if-changed a file whose text would not change is left alone. Runs `--version`s; writes files."""
    from gpuhook.cli.cdi_files import describe, installed_readers

    config = load()
    caps = frozenset(CAPABILITIES) if args.capabilities == "all" else frozenset(args.capabilities.split(","))
    root = Root(config.host_root)
    inventory = identified(root, discover(root))  # MIG devices' UUIDs too (NVML)
    wanted = [v for v in all_vendors() if args.vendor in ("all", v.NAME) and inventory.vendor(v.NAME)]
    if not wanted:
        raise CdiError(f"no {'GPU' if args.vendor == 'all' else args.vendor} driver under {config.host_root}")
    if args.output and len(wanted) > 1:
        raise CdiError("--output writes one spec: add " + " or ".join(f"--vendor {v.NAME}" for v in wanted)
                       + " (or use --output-dir)")
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    gpuhook_bin = os.path.join(here, "gpuhook")
    helper = beside(here, "gpuhook-hook")  # the hooks' native front end, where built (the warm helper serves it)
    readers = installed_readers(args.engine)
    print(f"gpuhook cdi: {describe(readers)}", file=sys.stderr if args.output == "-" else sys.stdout)
    for vendor in wanted:
        spec, warnings = build(vendor, inventory.vendor(vendor.NAME), inventory.root, caps, gpuhook_bin,  # type: ignore[arg-type]
                               config_path()[0], args.cdi_version, config.hook_timeout, readers, helper,
                               config.ldconfig, config.state_dir)
        text = to_yaml(spec) + "\n" if args.format == "yaml" else json.dumps(spec, indent=2) + "\n"
        path = args.output or os.path.join(args.output_dir, f"gpuhook-{vendor.NAME}.{args.format}")
        if args.if_changed and path != "-" and _holds(path, text):  # said when it was written
            print(f"unchanged {path}: {spec['kind']} is as the host has it (cdiVersion {spec['cdiVersion']})")
            continue
        for w in warnings:
            print(f"gpuhook cdi: warning: {w}", file=sys.stderr)
        if path == "-":
            sys.stdout.write(text)
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if args.output and not os.path.isdir(folder) and folder not in SPEC_DIRS:  # a typo is not a new tree
            raise CdiError(f"cannot write {path}: its directory {folder} does not exist (create it, or use "
                           "--output-dir, whose directory is made; CDI's own /etc/cdi and /var/run/cdi are made too)")
        try:
            write_text(path, text, make_dirs=True)
        except OSError as e:
            raise CdiError(f"cannot write {path}: {e.strerror or e}") from e
        print(f"wrote {path}: {spec['kind']} with {len(spec['devices'])} devices (cdiVersion {spec['cdiVersion']})")
    return 0


def _holds(path: str, text: str) -> bool:
    """Whether the file at `path` already holds exactly `text` (then --if-changed leaves it, and its mtime, alone)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(text.encode()) + 1) == text.encode()
    except OSError:
        return False


def list_specs(args: argparse.Namespace) -> int:
    """`gpuhook cdi list`: the devices of gpuhook's specs; 1 when a spec is malformed (named on stderr)."""
    found, broken = 0, 0
    for directory in args.spec_dir or SPEC_DIRS:
        for path in sorted(glob.glob(os.path.join(directory, "gpuhook-*.json"))):
            try:
                devices = _devices(path)
            except (OSError, ValueError) as e:
                print(f"gpuhook cdi list: {path}: {e}: regenerate it with `gpuhook cdi generate`", file=sys.stderr)
                broken += 1
                continue
            for name in devices:
                print(name)
                found += 1
        for path in sorted(glob.glob(os.path.join(directory, "gpuhook-*.yaml"))):
            print(f"{path}: (YAML spec; generate JSON to list its devices here)")
    if not found and not broken:
        print("no gpuhook CDI specs found: run `gpuhook cdi generate`")
    return 1 if broken else 0


def _devices(path: str) -> list[str]:
    """The qualified device names (kind=name) of a CDI JSON spec; ValueError saying what is malformed."""
    from gpuhook.configfile import read_regular
    from gpuhook.fastjson import loads

    data = read_regular(path, 0, 16 << 20)  # a FIFO put among the specs is an OSError, not a wait
    try:
        spec = loads(data)
    except ValueError as e:
        raise ValueError(f"not valid JSON ({e})") from e
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str) or not isinstance(spec.get("devices"), list):
        raise ValueError("not a CDI spec (no kind, or no devices list)")
    names = [d.get("name") for d in spec["devices"] if isinstance(d, dict)]
    if len(names) != len(spec["devices"]) or not all(isinstance(n, str) for n in names):
        raise ValueError("a device without a name")
    return [f"{spec['kind']}={n}" for n in names]
