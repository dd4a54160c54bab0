"""Command line: parse, call, print, return an exit code. No logic beyond that.

The group is here; each family of commands lives in a module of its own and is registered below, one
`add_command` per command. The family modules import click and `cli/options.py` only: the work they call
(cluster client, policy engine, Git, the sim) is imported inside the command functions, so a part that
fails to import fails its own commands only, not the listing of the others.

Exit codes (see the group's help below): 0 success, 1 denied/rejected/failed, 2 usage, 3 plan has
changes, 4 environment, 5 rollback failed.
"""

from __future__ import annotations

import sys

import click

from reconciler import __version__
from reconciler.cli import checklist, dashboard, deliver, demo, inspect, loop, operate, revisions, sim
from reconciler.errors import UserError


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    invoke_without_command=True,
)
@click.option(
    "--version", "show_version", is_flag=True, help="Show the version and exit (-v: the engines too)."
)
@click.option("-v", "--verbose", count=True, help="With --version: the kustomize engine and Python too.")
@click.pass_context
def cli(ctx: click.Context, show_version: bool, verbose: int) -> None:
    """GitOps reconciler and policy checker for Kubernetes Dynamic Resource Allocation (DRA).

    \b
    Exit codes:
      0  success, nothing denied
      1  policy denied, dry-run rejected, verification failed, or bad input
      2  usage error
      3  plan: changes pending (with --exit-code)
      4  environment problem: cluster, git remote or OPA server unreachable or failing, DRA API not
         served, OPA serving a bundle of other policies
      5  rollback failed: the cluster needs a human
    """
    if show_version:
        click.echo(f"dra-gitops, version {__version__}")
        if verbose:
            from reconciler.cli.versions import engine_versions

            for line in engine_versions():
                click.echo(line)
        ctx.exit(0)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


cli.add_command(inspect.check)
cli.add_command(inspect.inventory)
cli.add_command(inspect.diagnose)
cli.add_command(inspect.policy)
cli.add_command(inspect.watch_command)
cli.add_command(deliver.plan_command)
cli.add_command(deliver.apply_command)
cli.add_command(loop.run_command)
cli.add_command(loop.status_command)
cli.add_command(revisions.rollback_command)
cli.add_command(revisions.sync_command)
cli.add_command(loop.retry_command)
cli.add_command(operate.get_command)
cli.add_command(operate.suspend_command)
cli.add_command(operate.resume_command)
cli.add_command(operate.reconcile_command)
cli.add_command(operate.history_command)
cli.add_command(operate.abort_command)
cli.add_command(operate.diff_command)
cli.add_command(operate.approve_command)
cli.add_command(checklist.checklist_command)
cli.add_command(demo.demo_command)
cli.add_command(sim.sim)
cli.add_command(dashboard.ui_command)


def main() -> None:
    try:
        cli(prog_name="dra-gitops")
    except UserError as exc:  # pragma: no cover - handled inside commands; kept as a last guard
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
