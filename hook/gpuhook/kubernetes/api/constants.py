"""Fixed values of the kubelet device plugin API v1beta1.

These are part of the protocol (the kubelet compares them literally), so they
must match what the kubelet expects; see deviceplugin.proto next to this file.
"""

from typing import Final

VERSION: Final = "v1beta1"
"""API version a plugin sends in RegisterRequest.version."""

HEALTHY: Final = "Healthy"
"""Device.health of a usable device."""

UNHEALTHY: Final = "Unhealthy"
"""Device.health of a device the kubelet must not hand out."""

DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
"""Directory holding the kubelet's socket and every plugin's socket (trailing slash included)."""

KUBELET_SOCKET_NAME: Final = "kubelet.sock"
"""File name of the kubelet's Registration socket inside DEVICE_PLUGIN_PATH."""

KUBELET_SOCKET: Final = DEVICE_PLUGIN_PATH + KUBELET_SOCKET_NAME
"""Full path of the kubelet's Registration socket."""
