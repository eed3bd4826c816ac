"""The driver's two sockets, as the kubelet finds a DRA driver: the registration socket in its plugin registry
(pluginregistration v1: the kubelet asks GetInfo there, and is told the endpoint) and the endpoint serving
DRAPlugin v1 and v1beta1 (for kubelets before 1.34, the same messages under the older package's name) and the
DRAResourceHealth watch. Binds sockets.

In kubernetes-sigs/dra-example-driver: what its kubeletplugin helper (k8s.io/dynamic-resource-allocation/
kubeletplugin) does for it: registration, the sockets, both API versions.
"""

from __future__ import annotations

import contextlib
import os

import grpc

from gpuhook.kubernetes.api import dra_pb2 as pb
from gpuhook.kubernetes.api import dra_pb2_grpc, drahealth_pb2_grpc, pluginregistration_pb2_grpc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

V1BETA1 = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"  # the same messages on the wire


def serve(servicer: Any, endpoint: str, registration: str, old: grpc.Server | None) -> grpc.Server:
    """Both sockets bound and served by `servicer` (dra/driver.Driver: DRAPlugin, its health watch and
    Registration), the old server stopped. Creates the socket files."""
    from concurrent.futures import ThreadPoolExecutor

    if old is not None:
        old.stop(grace=0.5).wait(2)
    for path in (endpoint, registration):
        os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    server = grpc.server(ThreadPoolExecutor(max_workers=8, thread_name_prefix="dra-driver"),
                         options=[("grpc.so_reuseport", 0)])
    dra_pb2_grpc.add_DRAPluginServicer_to_server(servicer, server)
    drahealth_pb2_grpc.add_DRAResourceHealthServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers((_v1beta1(servicer),))
    pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{endpoint}")
    server.add_insecure_port(f"unix://{registration}")  # the kubelet asks GetInfo here, then calls the endpoint
    server.start()
    return server


def _v1beta1(servicer: Any) -> Any:
    """The v1beta1 service, for kubelets before 1.34: the same messages under the older package's name."""
    methods = {
        "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
            servicer.NodePrepareResources, request_deserializer=pb.NodePrepareResourcesRequest.FromString,
            response_serializer=pb.NodePrepareResourcesResponse.SerializeToString),
        "NodeUnprepareResources": grpc.unary_unary_rpc_method_handler(
            servicer.NodeUnprepareResources, request_deserializer=pb.NodeUnprepareResourcesRequest.FromString,
            response_serializer=pb.NodeUnprepareResourcesResponse.SerializeToString),
    }
    return grpc.method_handlers_generic_handler(V1BETA1, methods)
