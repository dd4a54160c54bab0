"""The simulated cluster of `dra-gitops sim serve`: assembled from its options, run until a signal.

The command (`cli/sim.py`) parses the flags into `ServeOptions`, calls `start_cluster` (which fails with
`OSError` when the port cannot be had) and then `serve_until_stopped`. Messages go through `say` (stderr
for the command); the cluster's URL through `announce` (stdout, for scripts that start it).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.sim.server import SimCluster


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    port: int
    served_versions: tuple[str, ...]
    token: str | None
    kube_version: str | None
    audit_log: Path | None
    kubeconfig_out: Path | None
    control_plane: bool
    nodes: int
    canary_nodes: int  # the first N nodes are labelled dra-gitops.io/canary=true
    components: tuple[str, ...]
    devices_per_node: int
    drivers: Sequence[str | dict[str, Any]]  # driver names, or entries of a device template
    driver_preinstalled: bool
    crash_images: tuple[str, ...]
    node_monitor_grace_period: float
    data_dir: Path | None = None  # where the store persists across restarts (None: memory only)
    # How long a deleted Namespace stays Terminating with its content (the namespace controller's work).
    namespace_content_delay: float = 0.0

    def node_labels(self) -> list[dict[str, str]]:
        return [{"dra-gitops.io/canary": "true"} if i < self.canary_nodes else {} for i in range(self.nodes)]


def driver_names(drivers: Sequence[str | dict[str, Any]]) -> list[str]:
    return [d if isinstance(d, str) else str(d["name"]) for d in drivers]


def start_cluster(options: ServeOptions) -> SimCluster:
    """The API server, listening on 127.0.0.1 (OSError when it cannot; DataDirError when its data
    directory is corrupt, foreign or in use)."""
    cluster = SimCluster(
        port=options.port,
        served_versions=options.served_versions,
        token=options.token,
        kube_version=options.kube_version,
        audit=options.audit_log or False,
        data_dir=options.data_dir,
        namespace_content_delay=options.namespace_content_delay,
    )
    cluster.start()
    return cluster


def _install_control_plane(cluster: SimCluster, options: ServeOptions, say: Callable[[str], None]) -> Any:
    try:
        from reconciler.sim import controlplane
    except ImportError:
        say("sim: no simulated control plane available; serving the API only")
        return None
    control = controlplane.install(
        cluster,
        nodes=options.nodes,
        devices_per_node=options.devices_per_node,
        drivers=options.drivers,
        driver_preinstalled=options.driver_preinstalled,
        node_labels=options.node_labels(),
        components=options.components,
        crash_images=options.crash_images,
        node_monitor_grace_period=options.node_monitor_grace_period,
    )
    published = (
        " (preinstalled)" if options.driver_preinstalled else " (published once the driver DaemonSet runs)"
    )
    say(
        f"sim: control plane with {options.nodes} node(s), driver(s) {', '.join(driver_names(options.drivers))}, "
        f"{options.devices_per_node} device(s) per node" + published
    )
    return control


def serve_until_stopped(
    cluster: SimCluster, options: ServeOptions, say: Callable[[str], None], announce: Callable[[str], None]
) -> None:
    """Start the control plane on the started `cluster`, write its kubeconfig, announce its URL, then
    serve until SIGTERM or Ctrl-C, and stop everything."""
    control = _install_control_plane(cluster, options, say) if options.control_plane else None
    if options.kubeconfig_out is not None:
        cluster.write_kubeconfig(options.kubeconfig_out)
        say(f"sim: kubeconfig written to {options.kubeconfig_out}")
    say(
        f"sim: serving resource.k8s.io {', '.join(cluster.api.served_versions)} as Kubernetes "
        f"{cluster.api.kube_version}; Ctrl-C stops"
    )
    announce(cluster.url)
    done = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        say("sim: stopping")
        if control is not None and hasattr(control, "stop"):
            control.stop()
        cluster.stop()
