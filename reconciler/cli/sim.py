"""``dra-gitops sim serve``: run the simulated cluster in the foreground."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click


def _versions(value: str) -> tuple[str, ...]:
    from reconciler.sim.resources import RESOURCE_VERSIONS

    if value.strip().lower() == "none":
        return ()  # a cluster without the DRA API, as a default 1.30 cluster
    versions = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in versions if v not in RESOURCE_VERSIONS]
    if bad or not versions:
        raise click.BadParameter(
            f"unknown resource.k8s.io version(s) {', '.join(bad) or '(none)'}; choose from {', '.join(RESOURCE_VERSIONS)}"
        )
    return versions


def _driver_configs(drivers: tuple[str, ...], template: Path | None) -> list[str | dict[str, Any]]:
    """The drivers to simulate: the template's entries, and the other --driver names as they are."""
    from reconciler.sim.devicetemplate import TemplateError, load_device_template

    if template is None:
        return list(drivers)
    try:
        entries = load_device_template(template)
    except TemplateError as exc:
        raise click.BadParameter(str(exc), param_hint="--device-template") from exc
    templated = {e["name"] for e in entries}
    return [*(d for d in drivers if d not in templated), *entries]


def _names(configs: list[str | dict[str, Any]]) -> list[str]:
    return [c if isinstance(c, str) else str(c["name"]) for c in configs]


@click.group()
def sim() -> None:
    """The embedded simulated Kubernetes cluster."""


@sim.command()
@click.option("--port", type=int, default=0, show_default=True, help="Port on 127.0.0.1 (0: a free one).")
@click.option("--nodes", type=int, default=2, show_default=True, help="Simulated Nodes.")
@click.option(
    "--canary-nodes",
    type=int,
    default=0,
    show_default=True,
    help="Label the first N nodes dra-gitops.io/canary=true (where canary driver workloads run).",
)
@click.option(
    "--components",
    default="controller-manager,scheduler,driver,kubelet",
    show_default=True,
    help="Simulated control-plane parts to run, comma-separated (e2e runs play driver and kubelet themselves).",
)
@click.option(
    "--devices-per-node", type=int, default=2, show_default=True, help="Devices per node and driver."
)
@click.option(
    "--driver",
    "drivers",
    multiple=True,
    default=("gpu.example.com",),
    show_default=True,
    help="DRA driver with hardware on the nodes (repeatable).",
)
@click.option(
    "--device-template",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="YAML of per-driver device attributes and capacities (productName, type, memory, compute, ...); "
    "its drivers are served too. See reconciler/sim/devicetemplate.py for the format.",
)
@click.option(
    "--driver-preinstalled",
    is_flag=True,
    help="Publish ResourceSlices at once, without waiting for the driver's DaemonSet.",
)
@click.option(
    "--served-versions",
    default="v1",
    show_default=True,
    help="resource.k8s.io versions to serve, comma-separated (e.g. v1,v1beta1; v1beta1 alone plays 1.32; "
    "none plays a cluster without DRA).",
)
@click.option(
    "--kubeconfig-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a kubeconfig for the cluster here.",
)
@click.option(
    "--token",
    default=None,
    help="Require this bearer token (the admin's; ServiceAccount tokens from TokenRequest work either way).",
)
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append every request (user, verb, resource, authorization decision) here as audit.k8s.io JSON lines.",
)
@click.option(
    "--kube-version", default=None, help="gitVersion to report (default follows --served-versions)."
)
@click.option(
    "--no-control-plane", is_flag=True, help="Serve the API only (no scheduler, controllers, kubelet)."
)
@click.option(
    "--crash-image",
    "crash_images",
    multiple=True,
    metavar="SUBSTR",
    help="The kubelet runs every container whose image contains SUBSTR as crash-looping "
    "(CrashLoopBackOff with the kubelet's back-off; repeatable).",
)
@click.option(
    "--node-monitor-grace-period",
    type=float,
    default=40.0,
    show_default=True,
    help="Seconds without a kubelet heartbeat before a node turns Ready=Unknown and gets the unreachable taints.",
)
def serve(
    port: int,
    nodes: int,
    canary_nodes: int,
    components: str,
    devices_per_node: int,
    drivers: tuple[str, ...],
    device_template: Path | None,
    driver_preinstalled: bool,
    served_versions: str,
    kubeconfig_out: Path | None,
    token: str | None,
    audit_log: Path | None,
    kube_version: str | None,
    no_control_plane: bool,
    crash_images: tuple[str, ...],
    node_monitor_grace_period: float,
) -> None:
    """Run the simulated cluster in the foreground until interrupted (prints its URL on stdout)."""
    from reconciler.sim.server import SimCluster

    configs = _driver_configs(drivers, device_template)

    cluster = SimCluster(
        port=port,
        served_versions=_versions(served_versions),
        token=token,
        kube_version=kube_version,
        audit=audit_log or False,
    )
    try:
        cluster.start()
    except OSError as e:
        raise click.ClickException(f"127.0.0.1:{port}: cannot listen: {e}") from e
    control: Any = None
    if not no_control_plane:
        try:
            from reconciler.sim import controlplane
        except ImportError:
            click.echo("sim: no simulated control plane available; serving the API only", err=True)
        else:
            control = controlplane.install(
                cluster,
                nodes=nodes,
                devices_per_node=devices_per_node,
                drivers=configs,
                driver_preinstalled=driver_preinstalled,
                node_labels=[
                    {"dra-gitops.io/canary": "true"} if i < canary_nodes else {} for i in range(nodes)
                ],
                components=[c.strip() for c in components.split(",") if c.strip()],
                crash_images=crash_images,
                node_monitor_grace_period=node_monitor_grace_period,
            )
            click.echo(
                f"sim: control plane with {nodes} node(s), driver(s) {', '.join(_names(configs))}, "
                f"{devices_per_node} device(s) per node"
                + (
                    " (preinstalled)"
                    if driver_preinstalled
                    else " (published once the driver DaemonSet runs)"
                ),
                err=True,
            )
    if kubeconfig_out is not None:
        cluster.write_kubeconfig(kubeconfig_out)
        click.echo(f"sim: kubeconfig written to {kubeconfig_out}", err=True)
    click.echo(
        f"sim: serving resource.k8s.io {', '.join(cluster.api.served_versions)} as Kubernetes "
        f"{cluster.api.kube_version}; Ctrl-C stops",
        err=True,
    )
    click.echo(cluster.url)
    done = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        click.echo("sim: stopping", err=True)
        if control is not None and hasattr(control, "stop"):
            control.stop()
        cluster.stop()
