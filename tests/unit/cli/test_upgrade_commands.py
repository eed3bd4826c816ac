"""`gpuhook upgrade plan|drain` as the admin reads them: a node is reported drained only when its own records and
device holders say so (#43 item 5), and every name that came from a spec or /proc is printed escaped, on one line
(#43 item 3)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from gpuhook import config as config_module
from gpuhook.cli import upgrade_commands
from gpuhook.errors import shown
from gpuhook.kubernetes import upgrade
from gpuhook.kubernetes.upgrade import Drained, GpuPod

HOSTILE = "\x1b[2J\x1b[Hjob-0\nGPU drivers: none (forged line)"


def _container(pod: str) -> dict[str, Any]:
    return {"id": "c" * 64, "pod": pod, "gpus": ["GPU-1"], "drivers": ["nvidia 550.54.15"]}


def _view(containers: list[dict[str, Any]], processes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"containers": containers, "processes": processes or [], "drivers": {"nvidia": "550.54.15"}}


class _Config:
    class kubernetes:
        resources = (("nvidia", "nvidia.com/gpu"),)

    state_dir = "/nonexistent"


def _args(dry_run: bool) -> argparse.Namespace:
    return argparse.Namespace(kubeconfig="kc", node="n1", dry_run=dry_run, timeout=5.0, resource=None,
                              dra_driver=["gpu.gpuhook.dev"], json=False)


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The drain's world: the API's GPU pods, the drain's outcome, what the host holds after it."""
    world: dict[str, Any] = {"pods": [], "after": _view([]), "drained": Drained()}
    monkeypatch.setattr(config_module, "load", lambda: _Config())
    monkeypatch.setattr(upgrade_commands, "_api", lambda args: object())
    monkeypatch.setattr(upgrade, "gpu_pods", lambda *a: world["pods"])
    monkeypatch.setattr(upgrade, "drain", lambda *a, **k: world["drained"])
    monkeypatch.setattr(upgrade_commands, "_host_view", lambda config, only_running=False: world["after"])
    return world


def test_a_drain_that_evicted_every_pod_is_not_reported_done_while_a_record_remains(
        node: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The API found no GPU pod (a shared claim it does not tie to the pod, say): gpuhook's own record of a GPU
    container running here still refuses the report."""
    node["after"] = _view([_container("ml/trainer/main")])
    assert upgrade_commands.drain(_args(dry_run=False)) == 1
    out = capsys.readouterr()
    assert "drained n1" not in out.out and "n1 is not drained" in out.err
    assert "ml/trainer/main" in out.out


def test_a_drain_refuses_while_a_process_holds_a_gpu_node(node: dict[str, Any],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    node["after"] = _view([], [{"pid": 42, "command": "python", "nodes": ["195:0"], "cgroup": "/kubepods/x"}])
    assert upgrade_commands.drain(_args(dry_run=False)) == 1
    assert "n1 is not drained" in capsys.readouterr().err


def test_a_drain_with_nothing_left_reports_the_node_drained(node: dict[str, Any],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    node["pods"] = [GpuPod(namespace="ml", name="trainer", uid="u", gpus=("nvidia.com/gpu: 1",))]
    node["drained"] = Drained(evicted=("ml/trainer",))
    assert upgrade_commands.drain(_args(dry_run=False)) == 0
    assert "drained n1: 1 GPU pod(s) evicted" in capsys.readouterr().out


def test_a_dry_run_names_a_gpu_container_no_pod_found_holds(node: dict[str, Any],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    node["after"] = _view([_container("ml/trainer/main")])
    assert upgrade_commands.drain(_args(dry_run=True)) == 1
    err = capsys.readouterr().err
    assert "GPU container cccccccccccccccccccccccc (ml/trainer/main) runs here, and no GPU pod above holds it" in err
    node["pods"] = [GpuPod(namespace="ml", name="trainer", uid="u",
                           gpus=("claim shared-gpu (gpu.gpuhook.dev: gpu-0)",))]
    assert upgrade_commands.drain(_args(dry_run=True)) == 0  # its pod is found: the drain evicts it


SHOWN = [
    ("escape sequence and newline", HOSTILE, "\\x1b[2J\\x1b[Hjob-0\\x0aGPU drivers: none (forged line)"),
    ("a backslash stays readable", "a\\x1b", "a\\\\x1b"),
    ("bidi override and line separator", "a\u202eb\u2028", "a\\u202eb\\u2028"),
    ("plain name", "ml/web-0/server", "ml/web-0/server"),
    ("unicode letters stay", "tëst…", "tëst…"),
]


@pytest.mark.parametrize(("raw", "printed"), [s[1:] for s in SHOWN], ids=[s[0] for s in SHOWN])
def test_shown(raw: str, printed: str) -> None:
    assert shown(raw) == printed


def test_the_plan_prints_a_hostile_pod_name_and_process_name_escaped_on_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    upgrade_commands._print_host(_view([_container(f"ml/{HOSTILE}/main")],
                                       [{"pid": 7, "command": "x\x1b]0;t\x07", "nodes": ["195:0"],
                                         "cgroup": "/a\nb"}]))
    upgrade_commands._print_pods("n1", [GpuPod(namespace="ml", name=HOSTILE, uid="u", gpus=("nvidia.com/gpu: 1",),
                                               owner="ReplicaSet/\r")])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    lines = out.splitlines()
    assert len(lines) == 7, out  # drivers, heading, container, heading, process, heading, pod: one line each
    assert not any(line.startswith("GPU drivers: none") for line in lines)
    assert sum("\\x1b[2J\\x1b[Hjob-0\\x0aGPU drivers: none (forged line)" in line for line in lines) == 2
