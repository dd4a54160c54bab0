"""``dra-gitops sim serve``: run the simulated cluster in the foreground (the work is in `sim/serve.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from reconciler.cli.options import DURATION


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
    type=DURATION,
    default="40s",
    show_default=True,
    help="How long without a kubelet heartbeat before a node turns Ready=Unknown and gets the unreachable taints.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the cluster's objects here, so that a restart with the same directory serves them again "
    "(default: in memory only).",
)
@click.option(
    "--namespace-delay",
    type=DURATION,
    default="0s",
    show_default=True,
    help="How long a deleted Namespace stays Terminating with its content before the namespace controller "
    "removes it (seconds on a real server).",
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
    data_dir: Path | None,
    namespace_delay: float,
) -> None:
    """Run the simulated cluster in the foreground until interrupted (prints its URL on stdout)."""
    from reconciler.sim.serve import ServeOptions, serve_until_stopped, start_cluster

    drivers_served = _driver_configs(drivers, device_template)  # a bad template is reported first
    options = ServeOptions(
        port=port,
        served_versions=_versions(served_versions),
        token=token,
        kube_version=kube_version,
        audit_log=audit_log,
        kubeconfig_out=kubeconfig_out,
        control_plane=not no_control_plane,
        nodes=nodes,
        canary_nodes=canary_nodes,
        components=tuple(c.strip() for c in components.split(",") if c.strip()),
        devices_per_node=devices_per_node,
        drivers=drivers_served,
        driver_preinstalled=driver_preinstalled,
        crash_images=crash_images,
        node_monitor_grace_period=node_monitor_grace_period,
        data_dir=data_dir,
        namespace_content_delay=namespace_delay,
    )
    from reconciler.sim.persist import DataDirError

    try:
        cluster = start_cluster(options)
    except DataDirError as e:
        raise click.ClickException(str(e)) from e
    except OSError as e:
        raise click.ClickException(f"127.0.0.1:{port}: cannot listen: {e}") from e
    serve_until_stopped(
        cluster, options, say=lambda message: click.echo(message, err=True), announce=click.echo
    )
