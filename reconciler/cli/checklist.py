"""`dra-gitops checklist`: parse, gather, judge, print, exit code. The work is in `reconciler.checklist`."""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.cli.options import (
    config_option,
    connect_target,
    handle_errors,
    kube_options,
    progress_printer,
    verbosity_options,
)


@click.command("checklist")
@config_option
@kube_options
@click.option(
    "--target",
    default="default",
    show_default=True,
    help="Reconcile target whose last pass to read (state ConfigMap dra-gitops-<target>).",
)
@click.option(
    "--namespace",
    "--state-namespace",
    "state_namespace",
    default="dra-gitops",
    show_default=True,
    help="Namespace of the state ConfigMap.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(("markdown", "json", "text")),
    default="markdown",
    show_default=True,
    help="Markdown task list (to paste into a ticket), JSON, or plain text.",
)
@verbosity_options
@handle_errors
def checklist_command(
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    target: str,
    state_namespace: str,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Operational checklist of a DRA deployment, filled from the cluster and the last reconcile.

    \b
    Before: Kubernetes and resource.k8s.io versions served, driver workloads rolled out and their
            current-template pods Ready, DeviceClasses and ResourceSlices per driver and node, device
            capacity per class and driver, the last attempt's server-side dry-run, the rollback target.
    During: claim states (allocated / reserved / pending), Warning Events on pods and claims since the
            last attempt began.
    After:  pods using claims Ready, their claims allocated and reserved, the last attempted revision
            applied and verified, devices seen in the container (when a verify-exec ran).

    Each item is checked, not checked or not applicable, with its evidence (numbers, names, shas).
    Read-only. Exit 0 when every applicable item is checked, 1 when any is not, 4 when the cluster
    cannot be reached.
    """
    from reconciler.checklist.gather import gather_facts
    from reconciler.checklist.items import build_checklist
    from reconciler.checklist.render import render

    # With --config, the target's own cluster: its state and what it runs live there.
    with connect_target(config_file, target, state_namespace, kubeconfig, kube_context) as connection:
        client = connection.state
        progress_printer(quiet)(f"reading the checklist of target {connection.name} from {client.host}")
        facts = gather_facts(client, connection.name, connection.namespace)
    checklist = build_checklist(facts)
    click.echo(render(checklist, output), nl=False)
    return checklist.exit_code
