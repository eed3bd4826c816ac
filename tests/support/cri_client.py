"""A small CRI (runtime.v1) client for the end-to-end tests: the kubelet's side of RunPodSandbox,
CreateContainer and the rest, over a runtime's unix socket, on the project's own CRI subset
(gpuhook/testing/cri/cri.proto). Every call has a deadline; a failed call raises grpc.RpcError, whose
`details()` is the runtime's message (`rpc_error_details` reads it from any exception)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import grpc

from gpuhook.frozen import frozen
from tests.support.cri import cri_pb2, cri_pb2_grpc

DEFAULT_TIMEOUT = 30.0


@frozen
class CriMount:
    """A host path bind-mounted into a container."""

    host_path: str
    container_path: str
    readonly: bool = False


@frozen
class CriDevice:
    """A host device node given to a container."""

    host_path: str
    container_path: str
    permissions: str = "rwm"


@frozen
class LogLine:
    """One line of a CRI container log: `<rfc3339nano> <stream> <P|F> <text>`."""

    time: str
    stream: str
    partial: bool
    text: str


def rpc_error_details(error: BaseException) -> str:
    """The runtime's message of a grpc.RpcError (its code and details), else str(error)."""
    details = getattr(error, "details", None)
    code = getattr(error, "code", None)
    if callable(details) and callable(code):
        return f"{code()}: {details()}"
    return str(error)


def parse_log(text: str) -> list[LogLine]:
    """The lines of a CRI log file's text, partial lines (`P`) kept as they are."""
    lines = []
    for raw in text.splitlines():
        parts = raw.split(" ", 3)
        if len(parts) < 3:
            continue
        lines.append(LogLine(parts[0], parts[1], parts[2] == "P", parts[3] if len(parts) == 4 else ""))
    return lines


def log_output(path: str, stream: str | None = None) -> str:
    """A container's output from its CRI log file: partial lines joined, one `\\n` per full line; only
    `stream` (stdout, stderr) when given."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return ""
    out = []
    for line in parse_log(text):
        if stream is None or line.stream == stream:
            out.append(line.text if line.partial else line.text + "\n")
    return "".join(out)


class CriClient:
    """RuntimeService calls over `unix://<socket>`, each with a deadline of `timeout` seconds."""

    def __init__(self, socket: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Open a channel (lazily connected) to the runtime's socket."""
        self.socket = socket
        self.timeout = timeout
        self._channel = grpc.insecure_channel(f"unix://{socket}")
        self._stub: Any = cri_pb2_grpc.RuntimeServiceStub(self._channel)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> CriClient:
        """The client itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the channel."""
        self.close()

    def _call(self, method: str, request: Any, timeout: float | None) -> Any:
        return getattr(self._stub, method)(request, timeout=self.timeout if timeout is None else timeout)

    def version(self, timeout: float | None = None) -> cri_pb2.VersionResponse:
        """The runtime's name and versions."""
        response: cri_pb2.VersionResponse = self._call("Version", cri_pb2.VersionRequest(version="v1"), timeout)
        return response

    def wait_ready(self, timeout: float = 30.0, alive: Any = None) -> cri_pb2.VersionResponse:
        """Version, retried until it answers or `timeout` passes; `alive()` false (the daemon died) stops early."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.version(timeout=2.0)
            except grpc.RpcError:
                if time.monotonic() > deadline or (alive is not None and not alive()):
                    raise
                time.sleep(0.1)

    @staticmethod
    def sandbox_config(name: str, namespace: str = "default", uid: str | None = None,
                       annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None,
                       log_dir: str = "", host_network: bool = True, hostname: str = "",
                       cgroup_parent: str = "") -> cri_pb2.PodSandboxConfig:
        """A PodSandboxConfig as the kubelet builds it for a pod (host network by default: no CNI needed). A
        host-network pod shares the host's UTS namespace too, so it gets no hostname (runc refuses one)."""
        mode = cri_pb2.NODE if host_network else cri_pb2.POD
        return cri_pb2.PodSandboxConfig(
            metadata=cri_pb2.PodSandboxMetadata(name=name, uid=uid or f"uid-{name}", namespace=namespace),
            hostname="" if host_network else hostname or name, log_directory=log_dir, labels=dict(labels or {}),
            annotations=dict(annotations or {}),
            linux=cri_pb2.LinuxPodSandboxConfig(
                cgroup_parent=cgroup_parent,
                security_context=cri_pb2.LinuxSandboxSecurityContext(
                    namespace_options=cri_pb2.NamespaceOption(network=mode, pid=cri_pb2.CONTAINER,
                                                              ipc=cri_pb2.POD))))

    def run_pod_sandbox(self, config: cri_pb2.PodSandboxConfig, runtime_handler: str = "",
                        timeout: float | None = None) -> str:
        """Start a pod's sandbox (its pause container) on `runtime_handler`; its id."""
        request = cri_pb2.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        response: cri_pb2.RunPodSandboxResponse = self._call("RunPodSandbox", request, timeout)
        return response.pod_sandbox_id

    def run_pod(self, name: str, runtime_handler: str = "", namespace: str = "default", uid: str | None = None,
                annotations: Mapping[str, str] | None = None, log_dir: str = "", host_network: bool = True,
                cgroup_parent: str = "", timeout: float | None = None) -> tuple[str, cri_pb2.PodSandboxConfig]:
        """sandbox_config + run_pod_sandbox: the sandbox id and the config (CreateContainer wants it again)."""
        config = self.sandbox_config(name, namespace, uid, annotations, log_dir=log_dir, host_network=host_network,
                                     cgroup_parent=cgroup_parent)
        return self.run_pod_sandbox(config, runtime_handler, timeout), config

    def stop_pod_sandbox(self, sandbox_id: str, timeout: float | None = None) -> None:
        """Stop the sandbox and every container in it."""
        self._call("StopPodSandbox", cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout)

    def remove_pod_sandbox(self, sandbox_id: str, timeout: float | None = None) -> None:
        """Remove a (stopped) sandbox and its containers."""
        self._call("RemovePodSandbox", cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout)

    def pod_sandbox_status(self, sandbox_id: str, verbose: bool = False,
                           timeout: float | None = None) -> cri_pb2.PodSandboxStatusResponse:
        """The sandbox's status (with `info`, the runtime's JSON details, when verbose)."""
        request = cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=verbose)
        response: cri_pb2.PodSandboxStatusResponse = self._call("PodSandboxStatus", request, timeout)
        return response

    def list_pod_sandboxes(self, timeout: float | None = None) -> list[cri_pb2.PodSandbox]:
        """Every sandbox the runtime knows."""
        response: cri_pb2.ListPodSandboxResponse = self._call("ListPodSandbox", cri_pb2.ListPodSandboxRequest(),
                                                              timeout)
        return list(response.items)

    def create_container(self, sandbox_id: str, sandbox_config: cri_pb2.PodSandboxConfig, name: str, image: str,
                         command: Sequence[str] = (), args: Sequence[str] = (),
                         envs: Mapping[str, str] | None = None, mounts: Iterable[CriMount] = (),
                         devices: Iterable[CriDevice] = (), annotations: Mapping[str, str] | None = None,
                         labels: Mapping[str, str] | None = None, log_path: str = "", working_dir: str = "",
                         privileged: bool = False, timeout: float | None = None) -> str:
        """Create a container in the sandbox (log_path relative to the sandbox's log_directory); its id."""
        config = cri_pb2.ContainerConfig(
            metadata=cri_pb2.ContainerMetadata(name=name),
            image=cri_pb2.ImageSpec(image=image, user_specified_image=image),  # CRI-O checks its policy on the latter
            command=list(command), args=list(args), working_dir=working_dir,
            envs=[cri_pb2.KeyValue(key=k, value=v) for k, v in (envs or {}).items()],
            mounts=[cri_pb2.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.readonly)
                    for m in mounts],
            devices=[cri_pb2.Device(container_path=d.container_path, host_path=d.host_path,
                                    permissions=d.permissions) for d in devices],
            labels=dict(labels or {}), annotations=dict(annotations or {}), log_path=log_path,
            linux=cri_pb2.LinuxContainerConfig(security_context=cri_pb2.LinuxContainerSecurityContext(
                privileged=privileged,
                namespace_options=sandbox_config.linux.security_context.namespace_options)))
        request = cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config,
                                                 sandbox_config=sandbox_config)
        response: cri_pb2.CreateContainerResponse = self._call("CreateContainer", request, timeout)
        return response.container_id

    def start_container(self, container_id: str, timeout: float | None = None) -> None:
        """Start a created container."""
        self._call("StartContainer", cri_pb2.StartContainerRequest(container_id=container_id), timeout)

    def stop_container(self, container_id: str, grace: int = 0, timeout: float | None = None) -> None:
        """Stop a container: SIGTERM, then SIGKILL after `grace` seconds."""
        request = cri_pb2.StopContainerRequest(container_id=container_id, timeout=grace)
        self._call("StopContainer", request, timeout)

    def remove_container(self, container_id: str, timeout: float | None = None) -> None:
        """Remove a container (stopped first if it runs)."""
        self._call("RemoveContainer", cri_pb2.RemoveContainerRequest(container_id=container_id), timeout)

    def container_status(self, container_id: str, verbose: bool = False,
                         timeout: float | None = None) -> cri_pb2.ContainerStatusResponse:
        """The container's status (with `info`, the runtime's JSON details such as its OCI spec, when verbose)."""
        request = cri_pb2.ContainerStatusRequest(container_id=container_id, verbose=verbose)
        response: cri_pb2.ContainerStatusResponse = self._call("ContainerStatus", request, timeout)
        return response

    def list_containers(self, sandbox_id: str = "", timeout: float | None = None) -> list[cri_pb2.Container]:
        """The containers (of one sandbox when given)."""
        request = cri_pb2.ListContainersRequest(filter=cri_pb2.ContainerFilter(pod_sandbox_id=sandbox_id))
        response: cri_pb2.ListContainersResponse = self._call("ListContainers", request, timeout)
        return list(response.containers)

    def wait_exited(self, container_id: str, timeout: float = 30.0) -> cri_pb2.ContainerStatus:
        """Poll ContainerStatus until the container has exited; its status. TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.container_status(container_id).status
            if status.state == cri_pb2.CONTAINER_EXITED:
                return status
            if time.monotonic() > deadline:
                state = cri_pb2.ContainerState.Name(status.state)
                raise TimeoutError(f"container {container_id} still {state} after {timeout}s")
            time.sleep(0.05)
