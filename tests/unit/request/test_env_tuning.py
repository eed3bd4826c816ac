"""Tuning asked by GPUHOOK_* env (Docker 20.10 passes no annotations): taken only where the policy lets env ask
tuning, never on a cluster node, and never for exclusive or MPS (an image's ENV is nobody's ask)."""

from __future__ import annotations

import pytest

from gpuhook.config import from_table
from gpuhook.errors import RequestError
from gpuhook.request.tuning import Tuning
from tests.unit.parsing import parse_request

A = "gpuhook.dev/"
GPU = {"NVIDIA_VISIBLE_DEVICES": "0"}

TAKEN = [
    ("clocks", {"GPUHOOK_CLOCKS": "1500"}, Tuning(clocks=(1500, 1500))),
    ("power", {"GPUHOOK_POWER_LIMIT": "300"}, Tuning(power_limit=300)),
    ("fan", {"GPUHOOK_FAN": "80"}, Tuning(fan="80")),
    ("compute mode", {"GPUHOOK_COMPUTE_MODE": "default"}, Tuning(compute_mode="default")),
    ("empty exclusive is no ask", {"GPUHOOK_EXCLUSIVE": " "}, Tuning()),
]


@pytest.mark.parametrize(("env", "tuning"), [t[1:] for t in TAKEN], ids=[t[0] for t in TAKEN])
def test_env_asks_tuning_where_the_policy_takes_it(env: dict[str, str], tuning: Tuning) -> None:
    request = parse_request({}, {**GPU, **env})
    assert request.tuning == tuning
    assert request.tuning_env == frozenset(k for k in tuning.asked_keys())


NEVER = [
    ("exclusive", "GPUHOOK_EXCLUSIVE", "true", "exclusive"),
    ("exclusive false too", "GPUHOOK_EXCLUSIVE", "false", "exclusive"),
    ("mps", "GPUHOOK_MPS", "true", "mps"),
    ("mps threads", "GPUHOOK_MPS_THREADS", "50", "mps-threads"),
    ("mps memory", "GPUHOOK_MPS_MEMORY", "8G", "mps-memory"),
]


@pytest.mark.parametrize(("key", "value", "named"), [n[1:] for n in NEVER], ids=[n[0] for n in NEVER])
def test_exclusive_and_mps_are_never_taken_from_env(key: str, value: str, named: str) -> None:
    with pytest.raises(RequestError) as e:
        parse_request({}, {**GPU, key: value})
    assert str(e.value) == (f"{key}={value!r}: {named} is never taken from env (an image's ENV would ask it for "
                            f"every container run from it): ask with the annotation {A}{named} (docker run "
                            f"--annotation), or unset it (-e {key}=)")


def test_the_annotation_wins_over_an_env_key_never_taken() -> None:
    request = parse_request({A + "gpus": "0", A + "exclusive": "false"}, {"GPUHOOK_EXCLUSIVE": "true"})
    assert request.tuning == Tuning() and request.tuning_env == frozenset()


IMAGE_ENV = {"GPUHOOK_EXCLUSIVE": "true", "GPUHOOK_POWER_LIMIT": "100", "GPUHOOK_FAN": "0", "GPUHOOK_MPS": "true",
             "GPUHOOK_MPS_THREADS": "5", "GPUHOOK_CLOCKS": "300", "GPUHOOK_COMPUTE_MODE": "prohibited",
             "GPUHOOK_PERF_LEVEL": "low"}


@pytest.mark.parametrize("accept_env", [True, False], ids=["accept_env_requests", "not"])
def test_a_cluster_node_takes_no_tuning_from_the_image_env(accept_env: bool) -> None:
    """requests = "allocated": the pod author asks by annotation or claim; an image's ENV asks nothing, whatever
    accept_env_requests says (the shipped DaemonSets set both)."""
    policy = from_table({"policy": {"requests": "allocated", "accept_env_requests": accept_env}}, "/x").policy
    assert not policy.env_tuning()
    request = parse_request({A + "clocks": "1500"}, IMAGE_ENV, accept_env, env_tuning=policy.env_tuning())
    assert request.tuning == Tuning(clocks=(1500, 1500))
    assert request.tuning_asked == (("clocks", "1500"),) and request.tuning_env == frozenset()


@pytest.mark.parametrize(("policy", "takes"), [
    ({}, True),
    ({"accept_env_requests": False}, False),
    ({"requests": "allocated"}, False),
    ({"requests": "allocated", "accept_env_requests": True}, False),
], ids=["single host", "env refused", "cluster node", "cluster node, accept_env_requests"])
def test_where_env_asks_tuning(policy: dict[str, object], takes: bool) -> None:
    assert from_table({"policy": policy}, "/x").policy.env_tuning() is takes
