from __future__ import annotations

import pytest

from gpuhook.errors import PolicyError
from gpuhook.plan import rootless


@pytest.mark.parametrize(("annotations", "gives", "refused"), [
    ({"gpuhook.dev/clocks": "1500"}, "", "gpuhook.dev/clocks asks gpuhook to change the host's GPUs"),
    ({"gpuhook.dev/power-limit": "300", "gpuhook.dev/exclusive": "true"}, "gpuhook's hook",
     "gpuhook.dev/power-limit, gpuhook.dev/exclusive asks"),
    ({"gpuhook.dev/mps": "true"}, "", "gpuhook.dev/mps asks"),  # a daemon on the host
    ({"gpuhook.dev/gpus": "0"}, "gpuhook's hook", "which gpuhook's hook needs to give a container GPUs"),
    ({"gpuhook.dev/gpus": "0"}, "", None),  # CDI's linker-cache hook: it writes only inside the container root
    ({"gpuhook.dev/gfx-override": "11.0.0"}, "", None),  # the container's own env
    ({}, "", None),
], ids=["clocks", "two", "mps", "hook-gpus", "cdi-hook", "env-knob", "nothing"])
def test_a_rootless_engine(annotations: dict[str, str], gives: str, refused: str | None) -> None:
    if refused is None:
        rootless.check(annotations, 47000, gives)
        return
    with pytest.raises(PolicyError) as e:
        rootless.check(annotations, 47000, gives)
    assert refused in str(e.value) and "runs as uid 47000 on the host (a rootless engine" in str(e.value)
    assert "nothing was applied" in str(e.value) and "\n" not in str(e.value)


def test_root_on_the_host_is_never_refused() -> None:
    rootless.check({"gpuhook.dev/clocks": "1500", "gpuhook.dev/gpus": "0"}, 0, "gpuhook's hook")
    rootless.check_spec({"annotations": {"gpuhook.dev/clocks": "1500"}}, 0, "gpuhook's runtime")


@pytest.mark.parametrize(("spec", "refused"), [
    ({"process": {"env": ["NVIDIA_VISIBLE_DEVICES=0", "GPUHOOK_POWER_LIMIT=300"]}}, "GPUHOOK_POWER_LIMIT asks gpuhook"),
    ({"process": {"env": ["NVIDIA_VISIBLE_DEVICES=all"]}}, "which gpuhook's runtime needs to give a container GPUs"),
    ({"annotations": {"gpuhook.dev/gpus": "1"}}, "which gpuhook's runtime needs"),
    ({"process": {"env": ["NVIDIA_VISIBLE_DEVICES=void", "PATH=/bin"]}}, None),  # a CDI spec's marker: nothing asked
    ({"process": {"env": ["AMD_VISIBLE_DEVICES="]}}, None),
    ({"process": {"env": ["GPUHOOK_CLOCKS=1500"]}}, "GPUHOOK_CLOCKS asks"),  # for GPUs the engine put there (--device)
    ({"process": "junk", "annotations": ["junk"]}, None),
    ("junk", None),
], ids=["env-tuning", "env-gpus", "annotation", "void", "empty", "tuning-env-alone", "junk-fields", "junk"])
def test_the_runtime_of_a_rootless_engine(spec: object, refused: str | None) -> None:
    if refused is None:
        rootless.check_spec(spec, 47000, "gpuhook's runtime")
        return
    with pytest.raises(PolicyError, match=refused):
        rootless.check_spec(spec, 47000, "gpuhook's runtime")
