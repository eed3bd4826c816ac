"""The Kubernetes parts of a request: the allocation annotation, count:N, sandboxes, who presents a record."""

from __future__ import annotations

import pytest

from gpuhook.errors import RequestError
from gpuhook.request.container import Selection, pod_keys
from gpuhook.request.tuning import KEYS as TUNING_KEYS
from tests.unit.parsing import parse_request

A = "gpuhook.dev/"
ID = "0123456789abcdef0123456789abcdef"

ALLOCATION_IDS = [
    ("lower hex", ID, ID),
    ("spaces trimmed", f" {ID}\n", ID),
    ("all zeros", "0" * 32, "0" * 32),
]


@pytest.mark.parametrize(("raw", "parsed"), [a[1:] for a in ALLOCATION_IDS], ids=[a[0] for a in ALLOCATION_IDS])
def test_allocation_id(raw: str, parsed: str) -> None:
    request = parse_request({A + "allocation": raw}, {})
    assert request.allocation == parsed
    assert request.selections == ()


def test_allocation_kept_next_to_env_and_gpus() -> None:
    request = parse_request({A + "allocation": ID, A + "gpus": "0"}, {"NVIDIA_VISIBLE_DEVICES": "all"})
    assert (request.allocation, request.selections) == (ID, (Selection(vendor=None, devices=("0",), source=A + "gpus",
                                                                       raw="0"),))
    request = parse_request({A + "allocation": ID}, {"NVIDIA_VISIBLE_DEVICES": "all"})
    assert (request.allocation, request.selections) == (ID, (Selection(vendor="nvidia", devices=None,
                                                                       source="NVIDIA_VISIBLE_DEVICES",
                                                                         raw="all"),))


def test_no_allocation_by_default() -> None:
    assert parse_request({A + "gpus": "all"}, {}).allocation is None


BAD_IDS = [
    ("upper hex", ID.upper()),
    ("one short", ID[:31]),
    ("one long", ID + "0"),
    ("not hex", "g" * 32),
    ("uuid with dashes", "01234567-89ab-cdef-0123-456789abcdef"),
    ("empty", ""),
    ("path", "../../etc/passwd" + "0" * 16),
    ("non-ascii digit", "٣" + ID[1:]),
]


@pytest.mark.parametrize("raw", [b[1] for b in BAD_IDS], ids=[b[0] for b in BAD_IDS])
def test_allocation_id_refused(raw: str) -> None:
    with pytest.raises(RequestError) as e:
        parse_request({A + "allocation": raw}, {})
    assert str(e.value) == (f"annotation {A}allocation={raw[:64]!r} is not an allocation id: it is set by gpuhook's "
                            "device plugin, through the kubelet, never by hand")


def test_allocation_id_quoted_short() -> None:
    with pytest.raises(RequestError) as e:
        parse_request({A + "allocation": "x" * 500}, {})
    assert f"={'x' * 64!r} is not" in str(e.value)


COUNTS = [
    ("one", "count:1", None, 1),
    ("most", "count:64", None, 64),
    ("upper case", "COUNT:2", None, 2),
    ("spaces", " count: 3 ", None, 3),
    ("leading zero", "count:064", None, 64),
    ("with vendor", "count:2", "amd", 2),
]


@pytest.mark.parametrize(("raw", "vendor", "n"), [c[1:] for c in COUNTS], ids=[c[0] for c in COUNTS])
def test_count(raw: str, vendor: str | None, n: int) -> None:
    annotations = {A + "gpus": raw} | ({A + "vendor": vendor} if vendor else {})
    assert parse_request(annotations, {}).selections == (Selection(vendor=vendor, devices=None, source=A + "gpus",
                                                                   raw=raw, count=n),)


BAD_COUNTS = ["count:0", "count:65", "count:100", "count:", "count:-1", "count:1.5", "count:two", "count:²",
              "count:0001", "count:1,2"]


@pytest.mark.parametrize("raw", BAD_COUNTS, ids=BAD_COUNTS)
def test_count_refused(raw: str) -> None:
    with pytest.raises(RequestError) as e:
        parse_request({A + "gpus": raw}, {})
    assert str(e.value) == (f"{A}gpus={raw!r}: expected count:N with N from 1 to 64 (that many free GPUs, picked by "
                            "gpuhook)")


@pytest.mark.parametrize("key", ["NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES"], ids=["nvidia", "amd"])
def test_count_not_in_env(key: str) -> None:
    with pytest.raises(RequestError, match=f"^{key}='count:2': cannot read 'count:2' as a GPU"):
        parse_request({}, {key: "count:2"})


def test_plain_selection_has_no_count() -> None:
    assert parse_request({A + "gpus": "all"}, {}).selections[0].count == 0


def test_pod_keys_are_all_but_the_allocation() -> None:
    assert pod_keys() == ("gpus", "vendor", "capabilities", "require", "host-rocm", *TUNING_KEYS)
    assert "allocation" not in pod_keys()
    assert "clocks" in pod_keys()


def test_unknown_key_lists_allocation_among_known() -> None:
    with pytest.raises(RequestError, match=r"^unknown annotation gpuhook\.dev/alloc='x': known keys are .*"
                                           r"gpuhook\.dev/allocation$"):
        parse_request({A + "alloc": "x"}, {})
