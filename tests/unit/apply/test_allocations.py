"""Allocation records in a temporary state_dir: round trip, claims, supersede, expiry, damaged files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuhook.apply import allocations
from gpuhook.errors import PolicyError, StateError
from gpuhook.frozen import replace
from gpuhook.plan.authority import Allocation

U0 = "GPU-00000000-0000-0000-0000-000000000000"
U1 = "GPU-00000001-0000-0000-0000-000000000000"


def _id(n: int) -> str:
    return f"{n:032x}"


def _rec(n: int, devices: tuple[str, ...] = (U0,), expires: float = 3700.0, claimed_by: str = "") -> Allocation:
    gpus = tuple(dict.fromkeys(d.split("::")[0] for d in devices))
    return Allocation(id=_id(n), resource="nvidia.com/gpu", vendor="nvidia", gpus=gpus, devices=devices, shared=False,
                      created=100.0, expires=expires, claimed_by=claimed_by,
                      container="c0" if claimed_by else "")


@pytest.fixture
def state(tmp_path: Path) -> str:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    return str(path)


def _file(state: str, alloc_id: str) -> str:
    return os.path.join(state, "allocations", f"{alloc_id}.json")


def test_round_trip(state: str) -> None:
    rec = Allocation(id=_id(1), resource="nvidia.com/gpu", vendor="nvidia", gpus=(U0, U1), devices=(f"{U0}::0",
                                                                                                    f"{U1}::1"),
                     shared=True, created=100.5, expires=3700.25,
                     claimed_by="pod-uid/main", container="abc123")
    allocations.save(state, rec)
    assert allocations.load(state, _id(1)) == rec


def test_record_and_directory_are_root_only(state: str) -> None:
    allocations.save(state, _rec(1))
    assert stat.S_IMODE(os.stat(_file(state, _id(1))).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(state, "allocations")).st_mode) == 0o700


def test_save_replaces(state: str) -> None:
    allocations.save(state, _rec(1))
    allocations.save(state, _rec(1, (U1,)))
    assert allocations.load(state, _id(1)) == _rec(1, (U1,))


def test_missing_record_is_none(state: str) -> None:
    assert allocations.load(state, _id(9)) is None


def test_load_stays_in_the_directory(state: str, tmp_path: Path) -> None:
    allocations.save(state, _rec(1))
    (Path(state) / f"{_id(2)}.json").write_text((Path(_file(state, _id(1)))).read_text())
    assert allocations.load(state, f"../{_id(2)}") is None
    assert allocations.load(state, f"../../state/allocations/{_id(1)}") == _rec(1)


def test_unsafe_state_dir_refused(tmp_path: Path) -> None:
    path = tmp_path / "open"
    path.mkdir()
    path.chmod(0o777)
    with pytest.raises(StateError, match="chmod go-w"):
        allocations.save(str(path), _rec(1))
    assert not (path / "allocations").exists()


GOOD = (f'{{"id":"{_id(1)}","resource":"nvidia.com/gpu","vendor":"nvidia","gpus":["{U0}"],"devices":["{U0}"],'
        '"shared":false,"created":100.0,"expires":3700.0}')
DAMAGED = [
    ("empty", b""),
    ("truncated", GOOD[:40].encode()),
    ("not utf-8", b'{"id":"\xff\xfe"}'),
    ("a list", b"[]"),
    ("null", b"null"),
    ("a string", b'"x"'),
    ("missing key", GOOD.replace('"shared":false,', "").encode()),
    ("gpus not a list", GOOD.replace(f'"gpus":["{U0}"]', '"gpus":5').encode()),
    ("expires not a number", GOOD.replace('"expires":3700.0', '"expires":"soon"').encode()),
    ("oversized", GOOD.replace(f'"gpus":["{U0}"]', '"gpus":[' + ",".join(['"x"'] * 30000) + "]").encode()),
]


@pytest.mark.parametrize("content", [d[1] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_damaged_record_is_ignored(state: str, content: bytes) -> None:
    allocations.save(state, _rec(2))
    Path(_file(state, _id(1))).write_bytes(content)
    assert allocations.load(state, _id(1)) is None
    assert allocations.all_records(state) == [_rec(2)]


def test_well_formed_literal_loads(state: str) -> None:
    allocations.directory(state)
    Path(_file(state, _id(1))).write_text(GOOD)
    assert allocations.load(state, _id(1)) == _rec(1)


def test_directory_in_place_of_a_record_is_ignored(state: str) -> None:
    os.makedirs(_file(state, _id(1)))
    assert allocations.load(state, _id(1)) is None


def test_all_records_skips_other_files(state: str) -> None:
    allocations.save(state, _rec(2))
    allocations.save(state, _rec(1))
    d = Path(state) / "allocations"
    (d / "notes.txt").write_text("x")
    (d / f".{_id(3)}.json").write_text(GOOD)
    assert allocations.all_records(state) == [_rec(1), _rec(2)]


def test_first_claim_wins_and_is_kept(state: str) -> None:
    allocations.save(state, _rec(1))
    got = allocations.claim(state, _id(1), "pod-a/main", "c1", 200.0)
    assert got == replace(_rec(1), claimed_by="pod-a/main", container="c1")
    assert allocations.load(state, _id(1)) == got


def test_restart_claims_again_with_new_container(state: str) -> None:
    allocations.save(state, _rec(1))
    allocations.claim(state, _id(1), "pod-a/main", "c1", 200.0)
    got = allocations.claim(state, _id(1), "pod-a/main", "c2", 99999.0)  # past expiry: claimed records stay
    assert (got.claimed_by, got.container) == ("pod-a/main", "c2")
    assert allocations.load(state, _id(1)) == got


REFUSED = [
    ("another container", _rec(1, claimed_by="pod-a/main"), "pod-a/sidecar", 200.0,
     f"gpuhook.dev/allocation={_id(1)}: this allocation (nvidia.com/gpu: {U0}) belongs to container pod-a/main, "
     "not pod-a/sidecar"),
    ("another pod", _rec(1, claimed_by="pod-a/main"), "pod-b/main", 200.0, "belongs to container pod-a/main, not "
     "pod-b/main"),
    ("expired unclaimed", _rec(1, expires=3700.0), "pod-a/main", 3710.9,
     f"gpuhook.dev/allocation={_id(1)}: the allocation expired 10 s ago unused"),
]


@pytest.mark.parametrize(("rec", "claimer", "now", "says"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_claim_refused(state: str, rec: Allocation, claimer: str, now: float, says: str) -> None:
    allocations.save(state, rec)
    with pytest.raises(PolicyError) as e:
        allocations.claim(state, rec.id, claimer, "c9", now)
    assert says in str(e.value)
    assert allocations.load(state, rec.id) == rec


def test_claim_of_missing_record_refused(state: str) -> None:
    with pytest.raises(PolicyError, match=f"^gpuhook.dev/allocation={_id(7)}: no such allocation on this node"):
        allocations.claim(state, _id(7), "pod-a/main", "c1", 200.0)


def test_claim_at_the_deadline_allowed(state: str) -> None:
    allocations.save(state, _rec(1, expires=3700.0))
    assert allocations.claim(state, _id(1), "p/c", "c1", 3700.0).claimed_by == "p/c"


def test_supersede_removes_claimed_records_sharing_a_device(state: str) -> None:
    allocations.save(state, _rec(1, (f"{U0}::0", f"{U0}::1"), claimed_by="p/a"))
    allocations.save(state, _rec(2, (f"{U1}::0",), claimed_by="p/b"))
    allocations.save(state, _rec(3, (f"{U0}::1",), claimed_by="p/c"))
    allocations.save(state, _rec(4, (f"{U0}::1", f"{U1}::1")))
    assert allocations.supersede(state, [f"{U0}::1"], keep=_id(4)) == [_id(1), _id(3)]
    assert [r.id for r in allocations.all_records(state)] == [_id(2), _id(4)]


def test_an_unclaimed_record_is_never_superseded(state: str) -> None:
    """The kubelet's admission of a pod whose init and app containers both ask for the device: two Allocate calls
    with it before either container runs. Both records must stay, or the first container is refused."""
    allocations.save(state, _rec(1, (U0,)))  # the init container's, not presented yet
    allocations.save(state, _rec(2, (U0,)))  # the app container's
    assert allocations.supersede(state, [U0], keep=_id(2)) == []
    assert [r.id for r in allocations.all_records(state)] == [_id(1), _id(2)]


def test_supersede_without_keep_and_without_match(state: str) -> None:
    allocations.save(state, _rec(1, (U0,), claimed_by="p/a"))
    allocations.save(state, _rec(2, (U1,), claimed_by="p/b"))
    assert allocations.supersede(state, ["GPU-other"]) == []
    assert allocations.supersede(state, [U1]) == [_id(2)]
    assert [r.id for r in allocations.all_records(state)] == [_id(1)]


def test_expire_removes_only_unclaimed_past_deadline(state: str) -> None:
    allocations.save(state, _rec(1, expires=100.0))
    allocations.save(state, _rec(2, expires=100.0, claimed_by="p/c"))
    allocations.save(state, _rec(3, expires=500.0))
    allocations.save(state, _rec(4, expires=200.0))
    assert allocations.expire(state, 200.0) == [_id(1)]
    assert [r.id for r in allocations.all_records(state)] == [_id(2), _id(3), _id(4)]


def test_remove_twice(state: str) -> None:
    allocations.save(state, _rec(1))
    allocations.remove(state, _id(1))
    allocations.remove(state, _id(1))
    assert allocations.load(state, _id(1)) is None


CHECKS = [
    ("unclaimed, in time", _rec(1), "p/c", 200.0),
    ("own claim", _rec(1, claimed_by="p/c"), "p/c", 200.0),
    ("own claim past expiry", _rec(1, claimed_by="p/c"), "p/c", 1e9),
]


@pytest.mark.parametrize(("rec", "claimer", "now"), [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS])
def test_check_allows(rec: Allocation, claimer: str, now: float) -> None:
    allocations.check(rec, rec.id, claimer, now)
