"""The one error hierarchy; only the CLI entry points turn these into exit codes and messages."""

from __future__ import annotations


class GpuhookError(Exception):
    """Base of every error gpuhook reports to a user."""


class ConfigError(GpuhookError):
    """The gpuhook configuration file is missing, unreadable or invalid."""


class RequestError(GpuhookError):
    """The container's annotations or env ask for something malformed."""


class DiscoveryError(GpuhookError):
    """The host (under host_root) lacks something the request needs."""


class PlanError(GpuhookError):
    """The request cannot be satisfied by what the host has."""


class PolicyError(GpuhookError):
    """The container may not start as asked: an image requirement the host cannot meet, or a policy."""


class SpecError(GpuhookError):
    """The OCI bundle or its config.json cannot be read or written."""


class RuntimeNotFoundError(GpuhookError):
    """The low-level runtime named in the config cannot be found."""


class SimulatorError(GpuhookError):
    """A fake GPU host could not be built."""


class EngineConfigError(GpuhookError):
    """A container engine's config file cannot be read or changed."""


class ProcessError(GpuhookError):
    """A helper program gpuhook ran failed."""
