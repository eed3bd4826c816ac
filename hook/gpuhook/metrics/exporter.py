"""`gpuhook exporter`: the long-running loop. Serves /metrics over HTTP (prometheus_client's server, each scrape
gathered afresh), or writes <dir>/gpuhook.prom for node_exporter's textfile collector every `interval` (atomically:
the collector never reads half a file), or prints one scrape. SIGTERM or SIGINT: stop, close the telemetry
sessions, exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from gpuhook.atomic import write_bytes
from gpuhook.errors import ConfigError, GpuhookError
from gpuhook.frozen import replace
from gpuhook.host.root import Root
from gpuhook.metrics.families import families, health
from gpuhook.metrics.gather import gather
from gpuhook.metrics.telemetry import Sessions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from gpuhook.config import Config
    from gpuhook.host.inventory import Gpu
    from gpuhook.metrics.families import Family

TEXTFILE = "gpuhook.prom"


def say(line: str) -> None:
    """One line on stderr (the DaemonSet's or the unit's log)."""
    sys.stderr.write(f"gpuhook exporter: {line}\n")
    sys.stderr.flush()


class Collector:
    """prometheus_client's collector: one gathering per scrape, one at a time (the telemetry sessions are
    shared); remembers the GPUs it saw, so that one discovery loses is reported unhealthy."""

    def __init__(self, config: Config, node_root: str = "/") -> None:
        self._root, self._node_root = Root(config.host_root), node_root
        self._state_dir = config.state_dir
        self._sessions = Sessions(self._root) if config.exporter.telemetry else None
        self._known: dict[str, Gpu] = {}
        self._health: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Family]:
        """The families of one scrape. Reads the host, the drivers and state_dir."""
        with self._lock:
            start = time.perf_counter()
            try:
                view = gather(self._root, self._state_dir, self._sessions, tuple(self._known.values()),
                              self._node_root)
            except (GpuhookError, OSError) as e:  # the scrape fails (Prometheus's `up` is 0) and says why
                say(f"cannot gather the metrics: {e}")
                raise
            view = replace(view, duration=time.perf_counter() - start)
            self._known.update({g.key(): g for v in view.inventory.vendors for g in v.gpus})
            self._report(health(view))
            return iter(families(view))

    def close(self) -> None:
        """End the telemetry sessions."""
        with self._lock:
            if self._sessions is not None:
                self._sessions.close()

    def _report(self, now: dict[tuple[str, str], str]) -> None:
        """A line for each GPU whose health changed (the first scrape reports the unhealthy ones)."""
        for (vendor, gpu), why in sorted(now.items()):
            if self._health.get((vendor, gpu), "") != why:
                say(f"{vendor} GPU {gpu}: " + (f"unhealthy: {why}" if why else "healthy again"))
        self._health = now


def parse_listen(text: str) -> tuple[str, int]:
    """("host", port) of `host:port`, `[v6]:port` or `:port` (every address); ConfigError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"exporter listen address {text!r} is not host:port (e.g. 127.0.0.1:9835, [::1]:9835)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


def run(config: Config, listen: str | None = None, textfile_dir: str | None = None, once: bool = False,
        node_root: str = "/") -> int:
    """Serve or write until SIGTERM/SIGINT (`once`: one scrape, to the textfile or stdout; `node_root`: where the
    node's / is mounted, for an exporter in a container of its own); the exit status."""
    registry = CollectorRegistry(auto_describe=False)
    collector = Collector(config, node_root)
    registry.register(collector)
    directory = textfile_dir or config.exporter.textfile_dir
    try:
        if once:
            data = generate_latest(registry)
            if directory:
                write_textfile(directory, data)
            else:
                sys.stdout.buffer.write(data)
            return 0
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if directory:
            say(f"writing {os.path.join(directory, TEXTFILE)} every {config.exporter.interval:g} s")
            while not stop.is_set():
                write_textfile(directory, generate_latest(registry))
                stop.wait(config.exporter.interval)
        else:
            _serve(registry, listen or config.exporter.listen, stop)
        say("stopped")
        return 0
    finally:
        collector.close()


def write_textfile(directory: str, data: bytes) -> None:
    """<directory>/gpuhook.prom replaced with `data` (temp + rename: *.tmp is not read by node_exporter). Writes
    a file."""
    write_bytes(os.path.join(directory, TEXTFILE), data, mode=0o644, make_dirs=True)


def _serve(registry: CollectorRegistry, listen: str, stop: threading.Event) -> None:
    from prometheus_client import start_http_server

    host, port = parse_listen(listen)
    server, thread = start_http_server(port, host, registry)
    shown = f"[{host}]" if ":" in host else host
    say(f"serving http://{shown}:{server.server_port}/metrics")
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
