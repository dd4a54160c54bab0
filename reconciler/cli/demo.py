"""`dra-gitops demo`: the reconciler's story in under a minute, with nothing but the package."""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.cli.options import grace_option, handle_errors, wait_for_signal


@click.command("demo")
@click.option(
    "--keep",
    is_flag=True,
    help="Leave the cluster and the reconciler running afterwards (with a kubeconfig for kubectl) until Ctrl-C.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Put the kubeconfig, Git repositories and cache here and keep them (default: a temporary "
    "directory, removed at the end).",
)
@grace_option("5s", "How long the verification gives claims and pods before a revision counts as failed.")
@click.option("--plain", is_flag=True, help="No spinner, even on a terminal.")
@handle_errors
def demo_command(keep: bool, workdir: Path | None, grace: float, plain: bool) -> int:
    """Play a GitOps history of a GPU stack on an embedded cluster, narrating each step.

    Starts the simulated cluster (five nodes in two zones, driver gpu.example.com with one GPU each,
    sim-node-0 the canary node), a Git server seeded with the example manifests, and the reconciler. Then
    pushes: a good baseline; a template naming a missing class (denied); a driver upgrade without a canary
    (denied); the canary (applied on the canary node); upgrades in waves declared (the driver's `rollout`);
    the promotion, told wave by wave (drain, replace, verify, soak); a build that crash-loops on zone-b
    (halted at wave 2, reverted, rolled back); more GPUs than exist (applied, verification fails, rolled
    back, diagnosis exhaustion); the fix. Ends with `status`'s history. No network; nothing is left behind
    unless --workdir or --keep says so.

    Exit 0 when every step ended as the story says, 1 otherwise.
    """
    from reconciler.demo.runner import DemoOptions, run_demo
    from reconciler.demo.terminal import Narrator

    narrator = Narrator(animate=False if plain else None)
    options = DemoOptions(workdir=workdir, keep=keep, grace=grace)
    return run_demo(options, narrator, wait_forever=_serve_until_signal if keep else None)


def _serve_until_signal() -> None:
    wait_for_signal()
    click.echo("demo: stopping", err=True)
