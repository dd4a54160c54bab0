"""`rollback` and `sync --revision`: deliver a chosen revision of a target now, through every check.

Parse, call, print, return an exit code; the work is in `loop/passes/requested.py` (the delivery) and
`loop/passes/handoff.py` (through the controller, or from here under the target's Lease).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from reconciler.cli import options as shared_options
from reconciler.cli.loop import git_target_options, target_cache_dir, targets_of
from reconciler.cli.options import (
    DURATION,
    F,
    check_options,
    handle_errors,
    kube_options,
    output_option,
    progress_printer,
    verbosity_options,
)


def revision_options(func: F) -> F:
    """What `rollback` and `sync` share: the target, the way to it, the policies, the output."""
    options: list[Callable[[F], F]] = [
        git_target_options,
        kube_options,
        shared_options.policy_options,
        click.option(
            "--via",
            type=click.Choice(["auto", "controller", "local"]),
            default="auto",
            show_default=True,
            help="controller: hand the request to the controller holding the target's Lease (needs only "
            "the operator role); local: take the Lease and deliver from here (needs the deployer's rights "
            "and --repo or --config); auto: controller while one holds the Lease, else local.",
        ),
        click.option(
            "--timeout",
            type=DURATION,
            default="10m",
            show_default=True,
            help="--via controller: how long to wait for the controller's answer (0: queue and return).",
        ),
        click.option(
            "--lease-wait",
            type=DURATION,
            default="30s",
            show_default=True,
            help="--via local: how long to wait for a pass holding the target's Lease to let it go.",
        ),
        output_option(("text", "json")),
        verbosity_options,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _run(verb: str, revision: str | None, force: bool, kwargs: dict[str, Any], yes_bad: bool = False) -> int:
    from reconciler.cluster.whoami import requester
    from reconciler.delivery.pipeline import DeliverOptions
    from reconciler.loop.config.targets import RESOURCE_PREFIX
    from reconciler.loop.passes.handoff import (
        Ask,
        controller_holds,
        deliver_here,
        hand_to_controller,
        outcome_of,
    )
    from reconciler.loop.passes.keep import KeptRevision
    from reconciler.loop.passes.revisions import GitRevisions
    from reconciler.loop.run.clusters import connect_target, select_target
    from reconciler.loop.run.worker import git_source_for
    from reconciler.outcome import requested_rollback_exit_code

    targets = targets_of(kwargs) if kwargs.get("repo") or kwargs.get("config_file") else []
    if targets:
        where = str(kwargs["config_file"] or "--config")
        targets = [select_target(targets, kwargs["target_name"], where)]
    name = targets[0].name if targets else kwargs["target_name"]
    namespace = targets[0].state_namespace if targets else kwargs["state_namespace"]
    progress = progress_printer(kwargs["quiet"])
    # The state and the objects in the target's cluster (with --config, its own), the Lease in --kubeconfig's.
    with connect_target(
        targets or None, name, namespace, kwargs["kubeconfig"], kwargs["kube_context"]
    ) as connection:
        client, leases = connection.state, connection.lease
        ask = Ask(verb, revision, force, requester(client), name, namespace, RESOURCE_PREFIX + name, yes_bad)
        via = kwargs["via"]
        if via == "auto":
            via = "controller" if controller_holds(leases, ask) or not targets else "local"
        if via == "controller":
            request, records = hand_to_controller(
                client, ask, kwargs["timeout"], progress, lease_client=leases
            )
            if not records:
                click.echo(f"{name}: {verb} to {request.revision} queued as request {request.id}")
                return 0
            outcome = outcome_of(records, verb)
            _print(kwargs["output"], name, outcome, request.revision, [r.to_json() for r in records], "")
            return requested_rollback_exit_code(outcome)
        if not targets:
            raise click.UsageError(f"{verb} --via local delivers from here: give --repo URL or --config FILE")
        target = targets[0]
        revisions = GitRevisions(
            git_source_for(target, target_cache_dir(kwargs["cache_dir"])),
            kept=KeptRevision(client, target.name, target.state_namespace),
        )
        try:
            delivery = DeliverOptions(
                target=target.name, namespace=target.state_namespace, grace=target.grace
            )
            check = check_options(kwargs["policy_dirs"], kwargs["opa_url"], kwargs["opa_token"])
            result = deliver_here(
                client, ask, revisions, delivery, check, kwargs["lease_wait"], progress, lease_client=leases
            )
        finally:
            revisions.close()
    shown = result.delivery.render_text() if result.delivery is not None else ""
    _print(kwargs["output"], name, result.outcome, result.sha, [r.to_json() for r in result.records], shown)
    return requested_rollback_exit_code(result.outcome)


def _print(output: str, target: str, outcome: str, sha: str | None, records: list[Any], text: str) -> None:
    if output == "json":
        click.echo(json.dumps({"outcome": outcome, "sha": sha, "records": records}, indent=2))
        return
    click.echo(f"{target}: {outcome} to {sha}")
    for record in records:
        if record.get("message"):
            click.echo(f"  {record.get('operation')} {str(record.get('sha'))[:12]}: {record['message']}")
    click.echo(text, nl=False)


@click.command("rollback")
@click.argument("revision", required=False)
@click.option("--to", "to_sha", metavar="SHA", help="The revision to go back to (the same as REVISION).")
@click.option(
    "--force",
    is_flag=True,
    help="Go to a revision the history does not show applied and verified, or past a policy denial; "
    "recorded with who asked and what it overrode.",
)
@click.option(
    "--yes-bad",
    is_flag=True,
    help="With --force: go even to a commit whose last record is a failure (a known-bad commit).",
)
@revision_options
@handle_errors
def rollback_command(
    revision: str | None, to_sha: str | None, force: bool, yes_bad: bool, **kwargs: Any
) -> int:
    """Put a target back on a revision of its history now, through every check, and hold there.

    REVISION is a history id (the number `status` shows) or a sha (a prefix of one in the history);
    without it, the good revision before the last good one. Only a revision the history shows applied
    and verified is accepted, and the policies judge it against the last good revision as for any
    delivery; `--force` goes past either, and the record says so (onto a commit whose last record is a
    failure, only with `--yes-bad` too). The reconciler does not move forward to
    the current head again until a newer commit arrives or `dra-gitops retry` is run (the way an Argo CD
    rollback pauses auto-sync). Exit 0 rolled back and verified, 1 refused, denied or failed (the last
    good revision put back), 5 when putting it back failed (the cluster needs a human), 4 cluster or Git
    problems.
    """
    if revision and to_sha and revision != to_sha:
        raise click.UsageError("give the revision once: REVISION or --to")
    if yes_bad and not force:
        raise click.UsageError("--yes-bad goes with --force")
    return _run("rollback", revision or to_sha, force, kwargs, yes_bad)


@click.command("sync")
@click.option(
    "--revision",
    required=True,
    metavar="SHA",
    help="The commit to deliver (a full sha, or a history id/sha).",
)
@revision_options
@handle_errors
def sync_command(revision: str, **kwargs: Any) -> int:
    """Deliver a chosen commit now, through every check, and hold there (`argocd app sync --revision`).

    Any commit of the repository (older or newer than the followed head, on any branch) goes through the
    signature check, the policies (judged against the last good revision, with live cluster data), the
    server-side dry-run, the staged apply and verification; a failure after a write puts the last good
    revision back. Afterwards the target stays on it: the head followed at that moment is not delivered
    until a newer commit arrives or `dra-gitops retry` is run. Exit 0 applied and verified, 1 denied or
    failed, 5 when putting the last good revision back failed, 4 cluster or Git problems.
    """
    return _run("sync", revision, False, kwargs)
