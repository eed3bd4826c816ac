"""The knob table (request/knobs.py) is the one place a knob is written: docs/tuning.md's tables, the Tuning record,
[tuning]'s schema and a claim's GpuConfig agree with its rows, and the rooms that read it act by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.config import TuningPolicy, schema
from gpuhook.errors import PolicyError, RequestError
from gpuhook.frozen import replace
from gpuhook.kubernetes.dra.config import FIELDS
from gpuhook.plan.tuning import check_policy
from gpuhook.request.knobs import CHOICES, CONTAINER, GRANTS, KNOB, KNOBS, RANGE, SWITCH, Knob, Sets
from gpuhook.request.tuning import GPU_CONFIG_FIELDS, KEYS, NOT_FROM_ENV, Tuning, from_env, parse_tuning

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs/tuning.md"

# one valid value of each knob as asked, and one the policy below refuses
ASKED = {"clocks": "1500", "power-limit": "300", "fan": "80", "perf-level": "high", "compute-mode": "prohibited",
         "exclusive": "true", "fine-grain-pcie": "true", "gfx-override": "10.3.0", "mps": "true",
         "mps-threads": "50", "mps-memory": "8G"}
REFUSING = TuningPolicy(clocks_mhz=(100, 200), power_watts=(10, 20), fan=False, fan_percent=(10, 20),
                        perf_levels=("low",), compute_modes=("default",), exclusive=False, mps=False)


def _row(knob: Knob) -> str:
    """A knob's line of docs/tuning.md's table, from its row."""
    cells = (f"`{knob.key}`", knob.values, knob.vendors, f"`{knob.env}`" if knob.from_env else "never",
             f"`{knob.claim}`" if knob.claim else "—", ", ".join(f"`{b.policy}`" for b in knob.bounds) or "—",
             "any" if knob.tenants == GRANTS else ", ".join(knob.tenants))
    return "| " + " | ".join(cells) + " |"


def _table(after: str) -> list[str]:
    """The rows of the first markdown table after the line `after`, its header and rule left out."""
    lines = DOCS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and i > lines.index(after))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start + 2:end]


def test_the_docs_table_is_the_rows() -> None:
    assert _table("The keys and their values are in [requests.md](requests.md#annotations):") == [
        _row(k) for k in KNOBS]


def test_the_docs_env_table_is_the_rows_taken_from_env() -> None:
    assert _table("Every tuning key has an env twin, `GPUHOOK_` and the key upper-cased with `-` as `_`:") == [
        f"| `gpuhook.dev/{k.key}` | `{k.env}` |" for k in KNOBS if k.from_env]


def test_the_names_the_rooms_read_are_the_rows() -> None:
    assert tuple(KNOB) == KEYS and NOT_FROM_ENV == ("exclusive", "mps", "mps-threads", "mps-memory")
    assert FIELDS == GPU_CONFIG_FIELDS == {k.claim: k.key for k in KNOBS if k.claim}
    assert list(FIELDS) == ["clocks", "powerLimit", "fan", "perfLevel", "computeMode", "exclusive", "mps",
                            "mpsActiveThreadPercentage", "mpsPinnedMemoryLimit"]  # the order of the API's messages
    assert {k.field for k in KNOBS if k.field} == set(Tuning.__slots__) - {"env"}
    assert all(set(k.tenants) <= set(GRANTS) and k.tenants[0] == GRANTS[0] for k in KNOBS)  # a whole GPU takes all
    assert all(k.why for k in KNOBS if k.tenants != GRANTS)


def test_every_bound_is_a_tuning_key_of_the_schema() -> None:
    tuning = schema()["properties"]["tuning"]["properties"]
    for knob in KNOBS:
        for bound in knob.bounds:
            assert bound.policy in tuning and bound.policy in TuningPolicy.__slots__, (knob.key, bound.policy)
            if bound.kind == CHOICES:  # every value the schema lets the admin list is one the knob takes
                allowed = tuning[bound.policy]["items"]["enum"]
                assert [knob.parse(v, "x") for v in allowed] == allowed
                assert knob.values == ", ".join(f"`{v}`" for v in allowed)


@pytest.mark.parametrize("key", list(ASKED))
def test_each_knob_parses_by_its_row(key: str) -> None:
    knob = KNOB[key]
    tuning = parse_tuning({key: ASKED[key], **({"mps": "true"} if key.startswith("mps-") else {})})
    assert (tuning.value(key) is not None) is bool(knob.field)
    assert tuning.touches_host() is (knob.scope != CONTAINER or key.startswith("mps-"))
    with pytest.raises(RequestError, match=f"^{knob.env}='bogus': expected "):
        parse_tuning({key: "bogus"}, frozenset({key}))
    if knob.from_env:
        assert from_env({}, {knob.env: ASKED[key]}) == ({key: ASKED[key]}, frozenset({key}))
    else:
        with pytest.raises(RequestError, match=f"^{knob.env}="):
            from_env({}, {knob.env: ASKED[key]})


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.bounds], ids=lambda k: k.key)
def test_each_bound_refuses_by_its_row(knob: Knob) -> None:
    tuning = parse_tuning({knob.key: ASKED[knob.key]})
    check_policy(tuning, TuningPolicy())
    with pytest.raises(PolicyError, match=rf"\[tuning\] {knob.bounds[0].policy}\b"):
        check_policy(tuning, REFUSING)
    for bound in knob.bounds:
        if bound.kind == RANGE:  # the other bounds let it through: the range alone refuses it
            lets = replace(REFUSING, **{b.policy: True for b in knob.bounds if b.kind == SWITCH})
            with pytest.raises(PolicyError, match=f"outside what this host allows: .* \\(\\[tuning\\] {bound.policy}"):
                check_policy(tuning, lets)
        if bound.free:
            check_policy(parse_tuning({knob.key: bound.free}), REFUSING)


def test_a_vendors_table_maps_in_its_order_and_refuses_what_it_lacks() -> None:
    table = (Sets("perf-level", "level", str), Sets("clocks", "level", lambda _: "manual"),
             Sets("clocks", "range", lambda mhz: f"{mhz[0]}-{mhz[1]}"), Sets("fan", "fan", str))
    assert Tuning(clocks=(900, 1000), fan="80").settings(table, {}, "GPU 0 is Toy") == (
        ("level", "manual"), ("range", "900-1000"), ("fan", "80"))
    assert Tuning(perf_level="high").settings(table, {}, "GPU 0 is Toy") == (("level", "high"),)
    assert Tuning(exclusive=True, mps=True).settings(table, {}, "GPU 0 is Toy") == ()
    with pytest.raises(RequestError, match=r"^gpuhook.dev/power-limit=300: GPU 0 is Toy, on which gpuhook sets no "):
        Tuning(power_limit=300).settings(table, {}, "GPU 0 is Toy")
    with pytest.raises(RequestError, match=r"^gpuhook.dev/compute-mode='default' is theirs but GPU 0 is Toy: ask"):
        Tuning(compute_mode="default").settings(table, {"compute-mode": ("theirs", "ask")}, "GPU 0 is Toy")
