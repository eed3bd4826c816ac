"""What a tenant may ask of a GPU others hold too (plan/shared_gpu.py): every kind of grant against every setting,
and the one line a refusal is, whichever source asked."""

from __future__ import annotations

import pytest

from gpuhook.errors import PolicyError
from gpuhook.plan.shared_gpu import MPS, SLICE, SLICE_OPEN, TIME_SLICED, WHOLE, Grant, check, own_mps
from gpuhook.request.tuning import Tuning, env_key

# one Tuning per setting a tenant can ask, as parse_tuning makes it
ASKS = {
    "clocks": Tuning(clocks=(1500, 1500)),
    "power-limit": Tuning(power_limit=300),
    "fan": Tuning(fan="80"),
    "fan auto": Tuning(fan="auto"),
    "perf-level": Tuning(perf_level="high"),
    "compute-mode default": Tuning(compute_mode="default"),
    "compute-mode exclusive-process": Tuning(compute_mode="exclusive-process"),
    "compute-mode prohibited": Tuning(compute_mode="prohibited"),
    "exclusive": Tuning(exclusive=True),
    "mps": Tuning(mps=True),
    "mps limits": Tuning(mps=True, mps_threads=20, mps_memory=1024),
    "AMD runtime env": Tuning(env=("HSA_FORCE_FINE_GRAIN_PCIE=1", "HSA_OVERRIDE_GFX_VERSION=10.3.0")),
}

# the asks each kind of grant lets through; every other one is refused
ALLOWED = {
    WHOLE: set(ASKS),
    TIME_SLICED: {"AMD runtime env"},
    MPS: {"mps", "mps limits", "AMD runtime env"},
    SLICE: {"exclusive", "mps", "mps limits", "AMD runtime env"},
    SLICE_OPEN: {"clocks", "power-limit", "fan", "fan auto", "perf-level", "exclusive", "mps", "mps limits",
                 "AMD runtime env"},
}

CASES = [(kind, ask, ask in allowed) for kind, allowed in ALLOWED.items() for ask in ASKS]


@pytest.mark.parametrize(("kind", "ask", "allowed"), CASES, ids=[f"{k}: {a}" for k, a, _ in CASES])
def test_every_grant_against_every_setting(kind: str, ask: str, allowed: bool) -> None:
    grant = Grant(kind, "the grant", "the way out")
    if allowed:
        check(ASKS[ask], grant)
        return
    with pytest.raises(PolicyError) as e:
        check(ASKS[ask], grant)
    key = ask.split()[0] if ask != "mps limits" else "mps"
    assert str(e.value).startswith(f"gpuhook.dev/{key} on a shared GPU (the grant): ")
    assert str(e.value).endswith(f"; the way out, or drop gpuhook.dev/{key}")


def test_the_first_refused_setting_is_named_by_its_source() -> None:
    tuning = Tuning(clocks=(1500, 1500), compute_mode="prohibited", exclusive=True)
    with pytest.raises(PolicyError) as e:
        check(tuning, Grant(TIME_SLICED, "a share", "ask a whole GPU"), env_key)
    assert str(e.value) == ("GPUHOOK_CLOCKS on a shared GPU (a share): clocks, power limit, fans and performance "
                            "level are the whole GPU's: on a shared GPU the admin sets them, not a tenant; ask a whole "
                            "GPU, or drop GPUHOOK_CLOCKS")


@pytest.mark.parametrize(("tuning", "refused"), [
    (Tuning(mps=True, exclusive=True), "exclusive"),
    (Tuning(mps=True, compute_mode="exclusive-process"), "compute-mode"),
    (Tuning(mps=True, power_limit=300), "power-limit"),
    (Tuning(mps=True, mps_threads=50), ""),
    (Tuning(exclusive=True, compute_mode="prohibited"), ""),
], ids=["exclusive", "compute mode", "power", "own limits", "no mps: a whole GPU"])
def test_a_container_asking_mps_is_one_client_of_a_shared_gpu(tuning: Tuning, refused: str) -> None:
    grant = own_mps(tuning)
    if not refused:
        assert grant is None or check(tuning, grant) is None
        return
    assert grant is not None
    with pytest.raises(PolicyError, match=f"^gpuhook.dev/{refused} on a shared GPU \\(gpuhook.dev/mps makes"):
        check(tuning, grant)
