"""Which DRA claims a container presents: its prestart hooks' markers, as the claim's CDI devices put them."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhook.request.dra_claim import claims_of, is_claim_hook, marker_args

U1, U2 = "0b1e6c5e-0000-4000-8000-000000000001", "0b1e6c5e-0000-4000-8000-000000000002"


def _hook(path: str, *args: str) -> dict[str, Any]:
    return {"path": path, "args": [path.rpartition("/")[2], *args]}


@pytest.mark.parametrize(("prestart", "expected"), [
    ([], ()),
    ([_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", *marker_args(U1, "gpu"))], ((U1, ("gpu",)),)),
    ([_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", *marker_args(U1, "a")),
      _hook("/usr/local/bin/gpuhook", "hook", "prestart", *marker_args(U1, "b")),
      _hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", *marker_args(U1, "a")),
      _hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", *marker_args(U2, "gpu"))],
     ((U1, ("a", "b")), (U2, ("gpu",)))),
    ([_hook("/opt/other/hook", "hook", "prestart", *marker_args(U1, "gpu"))], ()),  # not gpuhook's
    ([_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", "--claim")], ()),
    ([_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", "--claim", U1)], ()),  # no request
    ([_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", "--claim", f"{U1}/a/b")], ()),
    ([_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", "--claim", f"{'x' * 65}/a")], ()),
    (["not a hook", {"path": 7}], ()),
], ids=["none", "one", "requests of two claims, repeated", "another program", "no value", "no request",
        "a slash in the request", "a long uid", "junk"])
def test_the_claims_a_spec_presents(prestart: list[Any], expected: tuple[Any, ...]) -> None:
    assert claims_of({"prestart": prestart}) == expected
    assert claims_of({"poststop": prestart}) == ()  # markers are prestart hooks


def test_the_shim_recognises_the_marker_hooks_it_drops() -> None:
    assert is_claim_hook(_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart", *marker_args(U1, "gpu")))
    assert not is_claim_hook(_hook("/usr/local/bin/gpuhook-hook", "hook", "prestart"))
    assert not is_claim_hook(None)
