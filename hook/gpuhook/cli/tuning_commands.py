"""`gpuhook gc` and `gpuhook status`: the tuning ledger for the admin."""

from __future__ import annotations

import argparse
import json
import os
import sys

from gpuhook.apply import allocations, containers, state_dir
from gpuhook.config import load
from gpuhook.configfile import prune_cache
from gpuhook.errors import LedgerError, shown
from gpuhook.host.processes import holder_alive
from gpuhook.host.root import Root
from gpuhook.tuning import ledger, session
from gpuhook.tuning.backends import BackendSet


def gc(args: argparse.Namespace) -> int:
    """`gpuhook gc`: release what gone containers held, drop their records, what killed writers left, procfs
    copies, config-cache entries no one uses and expired unclaimed allocations; 1 when something could not be
    restored."""
    config = load()
    with BackendSet(Root(config.host_root), config.state_dir) as backends:
        problems = session.sweep(config.state_dir, backends)
    live = containers.live_records(config.state_dir)  # drops the records of containers that are gone
    removed = state_dir.sweep(config.state_dir, {c for r in live for c in r.copies}) + prune_cache()
    if os.path.isdir(os.path.join(config.state_dir, allocations.DIR)):  # the device plugin's, expired unclaimed
        import time

        removed += [f"allocation {a} (expired unclaimed)" for a in allocations.expire(config.state_dir, time.time())]
    for path in removed:
        print(f"gc: removed {path}")
    for p in problems:
        print(f"gpuhook gc: {p}", file=sys.stderr)
    print("gc: done" if not problems else f"gc: {len(problems)} settings could not be restored (kept for the next gc)")
    return 1 if problems else 0


def status(args: argparse.Namespace) -> int:
    """`gpuhook status`: the ledger as a table or JSON."""
    path = args.ledger or os.path.join(load().state_dir, ledger.NAME)
    if args.ledger and not os.path.lexists(args.ledger):  # state_dir's own ledger is absent until tuning is held
        raise LedgerError(f"--ledger {args.ledger}: no such file (the ledger is state_dir/{ledger.NAME}; "
                          f"{ledger.NAME}.prev beside it is the one before)")
    state = ledger.load(path)
    try:  # a ledger of the right outline may still hold entries of other shapes: one line, not a traceback
        rows = [{"gpu": str(e["gpu"]), "index": e["index"], "setting": str(e["name"]), "original": str(e["original"]),
                 "current": str(e["value"]),
                 "holders": [str(h["id"]) + ("" if holder_alive(h) else " (gone)") for h in e["holders"]]}
                for e in sorted(state["settings"].values(), key=lambda e: float(e["seq"]))]
        leases = {g: str(h["id"]) + ("" if holder_alive(h) else " (gone)") for g, h in state["leases"].items()}
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise LedgerError(f"ledger {path} holds an entry gpuhook did not write ({type(e).__name__}: {e}): "
                          f"read the one before with --ledger {os.path.dirname(path)}/{ledger.NAME}.prev") from e
    if args.json:
        print(json.dumps({"settings": rows, "leases": leases}, indent=2))
        return 0
    if not rows and not leases:
        print("no GPU tuning is held")
    if rows:
        print(f"{'GPU':44} {'SETTING':12} {'ORIGINAL':12} {'CURRENT':12} HOLDERS")
        for r in rows:
            print(f"{shown(r['gpu']):44} {shown(r['setting']):12} {shown(r['original']):12} "
                  f"{shown(r['current']):12} {shown(', '.join(r['holders']))}")
    for gpu, holder in leases.items():  # a ledger given by --ledger may hold anything: every field escaped
        print(f"exclusive: {shown(gpu)} held by {shown(holder)}")
    return 0
