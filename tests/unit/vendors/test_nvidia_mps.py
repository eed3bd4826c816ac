"""The MPS daemon's directories: made below [tuning] mps_dir without following a planted link (issue 43, 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.errors import TuningError
from gpuhook.vendors.nvidia import mps

UUID = "GPU-00000000-0000-0000-0000-000000000001"


def test_make_puts_pipe_and_log_in_the_gpus_home(tmp_path: Path) -> None:
    mps.make(f"{tmp_path}/mps/{UUID}")
    assert (tmp_path / "mps" / UUID / "pipe").is_dir() and (tmp_path / "mps" / UUID / "log").is_dir()


def test_a_link_planted_at_the_gpus_home_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "mps").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "mps" / UUID).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TuningError, match=f"MPS directory cannot be trusted: {tmp_path}/mps/{UUID} is a symbolic"):
        mps.make(f"{tmp_path}/mps/{UUID}")
    assert list((tmp_path / "elsewhere").iterdir()) == []
