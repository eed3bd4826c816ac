"""`gpuhook system ...`: host set-up GPU containers need."""

from __future__ import annotations

from gpuhook.apply.dev_char_links import create, wanted
from gpuhook.config import load
from gpuhook.host.root import Root
from gpuhook.vendors.discover import discover


def create_dev_char_links(dry_run: bool) -> int:
    """`system create-dev-char-links`: the /dev/char links to every GPU node; 1 where something else is in the way.
    Writes symlinks under the host's /dev (nothing with `dry_run`)."""
    root = Root(load().host_root)
    inventory = discover(root)
    nodes = [n for v in inventory.vendors for n in (*v.shared_nodes, *(n for g in v.gpus for n in g.nodes))]
    done = create(root, wanted(nodes), dry_run)
    for link, what in done:
        shown = "would make" if dry_run and what in ("created", "replaced") else what
        note = " (something that is not a link is in the way: left alone)" if what == "blocked" else ""
        print(f"{shown:10} {link.path} -> {link.target}{note}")
    if not done:
        print(f"no GPU device nodes under host root {root.base}")
    return 1 if any(what == "blocked" for _, what in done) else 0
