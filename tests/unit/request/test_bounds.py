"""Requests cost time and memory linear in their text, never in the numbers they name, and odd numbers get the
normal one-line RequestError (never another exception, which the shim would call an internal error)."""

from __future__ import annotations

import time

import pytest

from gpuhook.errors import PlanError, RequestError
from gpuhook.host.inventory import Gpu, Inventory, VendorInventory
from gpuhook.plan.select import select_all
from gpuhook.request.requirements import from_container
from tests.unit.parsing import parse_request

A = "gpuhook.dev/"
BAD_GPUS = [
    ("huge range", "0-99999999999999"), ("5000 digits", "9" * 5000), ("unicode digits", "\u0663"),
    ("unicode range", "0-\u0663"), ("negative", "-1"), ("nan", "nan"), ("index past any host", "1024"),
    ("too long a list", ",".join(["0"] * 3000)),
]


@pytest.mark.parametrize(("value",), [(v,) for _, v in BAD_GPUS], ids=[n for n, _ in BAD_GPUS])
def test_bad_gpu_lists_are_request_errors(value: str) -> None:
    for ann, env in (({A + "gpus": value}, {}), ({}, {"NVIDIA_VISIBLE_DEVICES": value}),
                     ({}, {"AMD_VISIBLE_DEVICES": value})):
        with pytest.raises(RequestError) as info:
            parse_request(ann, env)
        assert len(str(info.value)) < 400 and "\n" not in str(info.value)


def test_lists_cost_linear_time_in_their_text() -> None:
    start = time.perf_counter()
    parse_request({A + "gpus": ",".join(["0-1023"] * 580)}, {})  # just under the 4096-character bound
    assert time.perf_counter() - start < 1.0


BAD_NUMBERS = [
    ("clocks", "\u0663\u0660\u0660"), ("clocks", "9" * 5000), ("clocks", "-5"), ("clocks", "nan"),
    ("clocks", "1500-99999999"),
    ("power-limit", "1e3"), ("power-limit", "9" * 30), ("power-limit", "0"), ("power-limit", "inf"),
    ("fan", "101"), ("fan", "-1"), ("fan", "\u0665\u0660"), ("fan", "50.5"), ("fan", "9" * 5000), ("fan", "max"),
    ("gfx-override", "10.3.\u0660"), ("gfx-override", "1" * 40 + ".0.0"), ("host-rocm", "6." + "1" * 5000),
]


@pytest.mark.parametrize(("key", "value"), BAD_NUMBERS, ids=[f"{k}={v[:12]}" for k, v in BAD_NUMBERS])
def test_bad_numbers_are_request_errors(key: str, value: str) -> None:
    with pytest.raises(RequestError):
        parse_request({A + "gpus": "0", A + key: value}, {})


@pytest.mark.parametrize("value", ["cuda>=12.\u0664", "cuda>=" + "1" * 5000, "driver>=nan", "cuda>=-1"])
def test_bad_requirement_numbers_are_request_errors(value: str) -> None:
    with pytest.raises(RequestError):
        from_container({"NVIDIA_REQUIRE_CUDA": value}, {})


def test_a_long_cuda_version_is_not_a_requirement() -> None:
    assert from_container({"CUDA_VERSION": "1" * 5000 + ".2"}, {}) == ()


def test_an_index_past_the_host_names_the_hosts_count() -> None:
    gpus = tuple(Gpu(vendor="nvidia", index=i, uuid=f"GPU-{i}", pci=f"0000:1{i}:00.0", model="H100",
                     nodes=()) for i in range(2))
    inventory = Inventory("/", (VendorInventory(vendor="nvidia", driver_version="550", gpus=gpus, shared_nodes=()),))
    with pytest.raises(PlanError, match=r"no NVIDIA GPU 2 on this host \(2 NVIDIA GPUs\)"):
        select_all(parse_request({A + "gpus": "0-7"}, {}), inventory)


@pytest.mark.parametrize(("value", "fan"), [("80", "80"), (" 80% ", "80"), ("007", "7"), ("AUTO", "auto"), ("0", "0")])
def test_fan_values(value: str, fan: str) -> None:
    assert parse_request({A + "gpus": "0", A + "fan": value}, {}).tuning.fan == fan
