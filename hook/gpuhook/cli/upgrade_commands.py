"""`gpuhook upgrade plan` and `gpuhook upgrade drain`: before a GPU driver is upgraded or reloaded (amdgpu-dkms, an
NVIDIA driver), everything using the GPUs must stop. The plan names the GPU containers gpuhook set up here (and their
pods), the processes holding GPU device nodes open (in containers or not), and on a Kubernetes node the pods holding
its GPUs with the PodDisruptionBudgets that would refuse their eviction now. The drain cordons the node and evicts
those pods through the Eviction API, budgets honoured; it changes nothing unless told --no-dry-run."""

from __future__ import annotations

import json
import os
import sys

from gpuhook.errors import GpuhookError, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from gpuhook.apply.containers import ContainerRecord
    from gpuhook.config import Config
    from gpuhook.host.holders import Holder
    from gpuhook.kubernetes.apiserver import ApiServer
    from gpuhook.kubernetes.upgrade import GpuPod


def plan(args: argparse.Namespace) -> int:
    """Print what holds the GPUs: containers, processes, pods (with --kubeconfig or in a pod). Reads only."""
    from gpuhook.config import load

    config = load()
    found = _host_view(config)
    api = _api(args)
    pods = _pods(api, args, config) if api else None
    if args.json:
        out: dict[str, Any] = {**found, "node": args.node if api else None}
        if pods is not None:
            out["pods"] = [{"pod": p.key, "gpus": list(p.gpus), "owner": p.owner, "budgets": list(p.budgets),
                            "blocked_by": list(p.blocked)} for p in pods]
        print(json.dumps(out, indent=2))
        return 0
    _print_host(found)
    if pods is not None:
        _print_pods(args.node, pods)
    return 0


def drain(args: argparse.Namespace) -> int:
    """Cordon the node and evict its GPU pods (budgets honoured), or with --dry-run (the default) say what it would
    do. 0 when every GPU pod is gone (or would be evicted now), 1 otherwise. Writes the API without --dry-run."""
    from gpuhook.config import load
    from gpuhook.kubernetes import upgrade

    config = load()
    api = _api(args)
    if api is None:
        found = _host_view(config)
        _print_host(found)
        if found["containers"] or found["processes"]:
            print("gpuhook upgrade drain: this host is no Kubernetes node (no --kubeconfig, not in a pod): stop the "
                  "containers and processes above before the driver is reloaded", file=sys.stderr)
            return 1
        return 0
    pods = _pods(api, args, config)
    if args.dry_run:
        _print_pods(args.node, pods)
        blocked = [p for p in pods if p.blocked]
        print(f"dry run: would cordon {args.node} and evict {len(pods)} GPU pod(s)"
              + (f"; {len(blocked)} blocked now by their budgets" if blocked else "")
              + ": run again with --no-dry-run to do it")
        unseen = _unseen(_host_view(config), {p.key for p in pods})
        for c in unseen:
            print(f"gpuhook upgrade drain: GPU container {shown(c['id'][:24])} ({shown(c['pod']) or 'no pod'}) runs "
                  "here, and no GPU pod above holds it: the drain would not stop it", file=sys.stderr)
        return 1 if blocked or unseen else 0
    done = upgrade.drain(api, args.node, pods, args.timeout, say=lambda line: print(shown(line)))
    for pod, why in done.refused:
        print(f"gpuhook upgrade drain: {shown(pod)} was not evicted within {args.timeout:g} s: {shown(why)}; the "
              "node stays cordoned: scale its workload out to a spare node or relax the budget, then drain again",
              file=sys.stderr)
    for pod in done.remaining:
        print(f"gpuhook upgrade drain: {shown(pod)} was evicted but is still terminating after {args.timeout:g} s",
              file=sys.stderr)
    if not done.complete:
        return 1
    found = _host_view(config, only_running=True)  # the node's own word: what the API does not know still holds
    # the GPUs (a container that exited and waits for its engine to remove it holds nothing)
    if found["containers"] or found["processes"]:
        _print_host(found)
        print(f"gpuhook upgrade drain: {len(done.evicted)} GPU pod(s) evicted, but the GPU containers or processes "
              f"above still hold this node's GPUs: {args.node} is not drained; stop them (or find their pods) and "
              "drain again", file=sys.stderr)
        return 1
    print(f"drained {args.node}: {len(done.evicted)} GPU pod(s) evicted; the node stays cordoned until "
          f"`kubectl uncordon {args.node}` after the upgrade")
    return 0


def _unseen(found: dict[str, Any], pods: set[str]) -> list[dict[str, Any]]:
    """The GPU containers recorded here whose pod (namespace/name) is none of `pods`."""
    return [c for c in found["containers"] if "/".join(c["pod"].split("/")[:2]) not in pods or not c["pod"]]


def _api(args: argparse.Namespace) -> ApiServer | None:
    from gpuhook.kubernetes import apiserver

    if args.kubeconfig:
        return apiserver.from_kubeconfig(args.kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(f"{apiserver.SERVICE_ACCOUNT}/token"):
        return apiserver.in_cluster()
    return None


def _pods(api: ApiServer, args: argparse.Namespace, config: Config) -> list[GpuPod]:
    from gpuhook.kubernetes import upgrade

    if not args.node:
        raise GpuhookError("which node? --node NAME (or env NODE_NAME)")
    from gpuhook.vendors.registry import resources as named

    resources = {r for _, r in named(config.kubernetes.resources)} | set(args.resource or ())
    return upgrade.gpu_pods(api, args.node, resources, set(args.dra_driver))


def users(config: Config, numbers: frozenset[tuple[int, int]]) -> tuple[list[ContainerRecord], list[Holder]]:
    """The live GPU containers gpuhook recorded (state_dir is not made when absent) and the processes holding any
    device of `numbers` (major, minor) open. Reads state_dir and /proc."""
    from gpuhook.apply import containers
    from gpuhook.host.holders import holders

    records = containers.live_records(config.state_dir, prune=False) if os.path.isdir(config.state_dir) else []
    return records, holders(numbers)


def _host_view(config: Config, only_running: bool = False) -> dict[str, Any]:
    """The GPU containers gpuhook recorded here (`only_running`: those whose processes still run) and the processes
    holding GPU device nodes open. Reads the host."""
    from gpuhook.apply.containers import running
    from gpuhook.host.root import Root
    from gpuhook.vendors.discover import discover

    inventory = discover(Root(config.host_root))
    records, held = users(config, frozenset(
        (n.major, n.minor) for inv in inventory.vendors
        for n in (*inv.shared_nodes, *(m for g in (*inv.gpus, *inv.slices) for m in g.nodes))))
    if only_running:
        records = [r for r in records if running(r)]
    return {"containers": [{"id": r.id, "pod": f"{r.namespace}/{r.pod}/{r.container}" if r.pod else "",
                            "gpus": list(r.gpus), "drivers": [f"{v} {d}" for v, d in r.drivers]} for r in records],
            "processes": [{"pid": h.pid, "command": h.command, "nodes": [f"{a}:{b}" for a, b in h.nodes],
                           "cgroup": h.cgroup} for h in held],
            "drivers": {inv.vendor: inv.driver_version or "" for inv in inventory.vendors}}


def _print_host(found: dict[str, Any]) -> None:
    drivers = ", ".join(f"{v} {d}".strip() for v, d in found["drivers"].items()) or "none"
    print(f"GPU drivers: {drivers}")
    if found["containers"]:
        print("GPU containers gpuhook set up here (each must stop before the driver reloads):")
        for c in found["containers"]:
            print(f"  {shown(c['id'][:24]):24}  {shown(c['pod']) or '-':40}  {shown(','.join(c['gpus'])) or '-':30}  "
                  f"{shown('; '.join(c['drivers']))}")
    else:
        print("no GPU containers gpuhook set up here are running")
    if found["processes"]:
        print("processes holding GPU device nodes open:")
        for p in found["processes"]:
            print(f"  {p['pid']:>8}  {shown(p['command']):16}  {' '.join(p['nodes']):20}  {shown(p['cgroup'])}")
    else:
        print("no process holds a GPU device node open")


def _print_pods(node: str, pods: list[GpuPod]) -> None:
    if not pods:
        print(f"no pod on {node} holds a GPU")
        return
    print(f"pods on {node} holding GPUs (evicted by a drain, their budgets honoured):")
    for p in pods:
        budget = shown(", ".join(p.budgets)) or "-"
        state = f"blocked now by {shown(', '.join(p.blocked))} (no disruption allowed)" if p.blocked else "evictable"
        owner = shown(p.owner) or "bare pod: nothing recreates it"
        print(f"  {shown(p.key):40}  {shown('; '.join(p.gpus)):40}  budgets: {budget:20}  {state}  [{owner}]")
