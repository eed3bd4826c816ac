"""Whether gpuhook's DRA driver serves the node: its mark in state_dir, as the runtime reads it."""

from __future__ import annotations

import os
from pathlib import Path

from gpuhook.apply import dra_node


def test_the_mark_names_the_driver_until_it_is_removed(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    assert dra_node.driver(state) == ""
    dra_node.mark(state, "gpu.gpuhook.dev")
    assert dra_node.driver(state) == "gpu.gpuhook.dev"
    dra_node.unmark(state)
    dra_node.unmark(state)  # twice is fine
    assert dra_node.driver(state) == ""


def test_a_link_or_a_directory_in_its_place_is_no_driver(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("gpu.gpuhook.dev\n")
    os.symlink(target, tmp_path / dra_node.FILE)
    assert dra_node.driver(str(tmp_path)) == ""
    os.unlink(tmp_path / dra_node.FILE)
    (tmp_path / dra_node.FILE).mkdir()
    assert dra_node.driver(str(tmp_path)) == ""
