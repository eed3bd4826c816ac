"""Docker's --gpus as it reaches the spec: every form dockerd writes (moby's nvidia device driver), the hook that
marks it, and [policy] gpus_any_vendor."""

from __future__ import annotations

import pytest

from gpuhook.errors import RequestError
from gpuhook.request.container import Selection
from tests.unit.parsing import gpus_flag, is_gpus_hook, parse_request

HOOK = {"path": "/usr/local/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
UUID = "GPU-0000000a-1111-2222-3333-444455556666"

# (what the user typed, the env dockerd appended, the selection gpuhook reads)
FORMS = [
    ("--gpus all", {"NVIDIA_VISIBLE_DEVICES": "all"}, Selection(vendor="nvidia", devices=None, source="--gpus",
                                                                raw="all", any_vendor=True)),
    ("--gpus 2", {"NVIDIA_VISIBLE_DEVICES": "0,1"}, Selection(vendor="nvidia", devices=("0", "1"), source="--gpus",
                                                              raw="0,1", any_vendor=True)),
    ("--gpus device=1", {"NVIDIA_VISIBLE_DEVICES": "1"}, Selection(vendor="nvidia", devices=("1",), source="--gpus",
                                                                   raw="1", any_vendor=True)),
    ("--gpus '\"device=0,1\"'", {"NVIDIA_VISIBLE_DEVICES": "0,1"},
     Selection(vendor="nvidia", devices=("0", "1"), source="--gpus", raw="0,1", any_vendor=True)),
    ("--gpus device=UUID", {"NVIDIA_VISIBLE_DEVICES": UUID.upper().replace("GPU", "GPU")},
     Selection(vendor="nvidia", devices=(UUID,), source="--gpus", raw=UUID.upper(), any_vendor=True)),
    ("--gpus 0 (Docker >= 25)", {"NVIDIA_VISIBLE_DEVICES": "void"}, None),
    ("--gpus 0 (Docker 20.10: no env)", {}, None),
    # a CUDA image's own value comes first in process.env; dockerd appends the flag's, and the last one wins
]


@pytest.mark.parametrize(("env", "selection"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_every_form_docker_sends(env: dict[str, str], selection: Selection | None) -> None:
    request = parse_request({}, env, flag=gpus_flag({"prestart": [HOOK]}))
    assert request.selections == ((selection,) if selection else ())


def test_the_flag_counts_even_where_env_requests_do_not() -> None:
    """accept_env_requests = false keeps images from asking; the flag is the user's own ask, through dockerd."""
    env = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility,video",
           "AMD_VISIBLE_DEVICES": "0"}
    request = parse_request({}, env, accept_env=False, flag="nvidia")
    assert request.selections == (Selection(vendor="nvidia", devices=None, source="--gpus", raw="all",
                                            any_vendor=True),)
    assert request.capabilities == {"compute", "utility", "video"}  # --gpus all,capabilities=compute,utility,video
    assert parse_request({}, env, accept_env=False).selections == ()  # no hook: only the image's env


def test_without_the_hook_the_env_is_the_images() -> None:
    assert parse_request({}, {"NVIDIA_VISIBLE_DEVICES": "all"}).selections == (
        Selection(vendor="nvidia", devices=None, source="NVIDIA_VISIBLE_DEVICES", raw="all"),)


@pytest.mark.parametrize(("annotations", "any_vendor", "selection"), [
    ({}, False, Selection(vendor="nvidia", devices=None, source="--gpus",
                          raw="all")),  # the policy off: NVIDIA only, as Docker always meant
    ({"gpuhook.dev/vendor": "amd"}, True, Selection(vendor="amd", devices=None, source="--gpus",
                                                    raw="all")),  # a mixed host: say which
], ids=["policy-off", "vendor-annotation"])
def test_vendor_of_the_flag(annotations: dict[str, str], any_vendor: bool, selection: Selection) -> None:
    request = parse_request(annotations, {"NVIDIA_VISIBLE_DEVICES": "all"}, flag="nvidia", any_vendor=any_vendor)
    assert request.selections == (selection,)


def test_vendor_annotation_still_needs_a_request() -> None:
    with pytest.raises(RequestError, match=r"needs gpuhook\.dev/gpus"):
        parse_request({"gpuhook.dev/vendor": "amd"}, {}, flag="nvidia")


@pytest.mark.parametrize(("hooks", "vendor"), [
    ({"prestart": [HOOK]}, "nvidia"),
    ({"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook"}]}, "nvidia"),  # by the file name
    ({"prestart": [{"path": "/opt/x/hook", "args": ["nvidia-container-runtime-hook", "prestart"]}]}, "nvidia"),
    ({"prestart": [{"path": "/usr/local/bin/gpuhook", "args": ["gpuhook", "hook", "prestart"]}]}, None),
    ({"poststop": [HOOK]}, None),  # only Docker's prestart hook is the flag's
    ({"prestart": None}, None), (None, None), ({"prestart": ["x", 3]}, None),
], ids=["docker", "path", "argv0", "gpuhook's", "other-stage", "null", "none", "junk"])
def test_the_hook_marks_the_flag(hooks: object, vendor: str | None) -> None:
    assert gpus_flag(hooks) == vendor
    assert is_gpus_hook(HOOK) and not is_gpus_hook({"path": "/usr/local/bin/gpuhook"}) and not is_gpus_hook("x")


@pytest.mark.parametrize("image_env", [{"AMD_VISIBLE_DEVICES": "all"}, {"AMD_VISIBLE_DEVICES": "0,1"}],
                         ids=["all", "list"])
@pytest.mark.parametrize("accept_env", [True, False], ids=["env accepted", "env refused"])
def test_the_flag_bounds_what_an_images_env_adds(image_env: dict[str, str], accept_env: bool) -> None:
    """`--gpus device=1` with an image carrying another vendor's env key: GPU 1 only, never that vendor's GPUs too."""
    request = parse_request({}, {**image_env, "NVIDIA_VISIBLE_DEVICES": "1"}, accept_env=accept_env, flag="nvidia")
    assert request.selections == (Selection(vendor="nvidia", devices=("1",), source="--gpus", raw="1",
                                            any_vendor=True),)


def test_an_annotation_bounds_what_env_adds() -> None:
    request = parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"},
                            {"AMD_VISIBLE_DEVICES": "all", "NVIDIA_VISIBLE_DEVICES": "all"})
    assert [(s.vendor, s.devices) for s in request.selections] == [("nvidia", ("0",))]
