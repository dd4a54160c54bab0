"""Operator verbs on a running deployment: `get`, `suspend`, `resume`, `reconcile`, `history`, `abort`, `diff`,
`approve`.

Parse, call, print, return an exit code; the work is in `loop/store/operations.py` (what they write) and
`loop/store/statusview.py` (what they print). They need the `dra-operator` role only (deploy/operator).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from reconciler.cli.loop import git_target_options, target_cache_dir, targets_of
from reconciler.cli.options import (
    DURATION,
    config_option,
    config_targets,
    connect,
    connect_target,
    handle_errors,
    kube_options,
    output_option,
    progress_printer,
    target_options,
    verbosity_options,
)


@click.command("get")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The `run --config` file: its targets (default: every target whose state is in --state-namespace).",
)
@click.option(
    "--state-namespace",
    default="dra-gitops",
    show_default=True,
    help="Namespace of the state ConfigMaps (with --config: each target's own).",
)
@kube_options
@output_option(("text", "json"))
@verbosity_options
@handle_errors
def get_command(
    config_file: Path | None,
    state_namespace: str,
    kubeconfig: str | None,
    kube_context: str | None,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Every target in one table: last good, last attempt and its outcome, in progress, suspended, source.

    Exit 0 when every last attempt applied, else the worst of their exit codes (as `status`).
    """
    from reconciler.loop.store.operations import cluster_targets
    from reconciler.loop.store.state import StateStore
    from reconciler.loop.store.statusview import render_targets, target_row
    from reconciler.outcome import worst_exit_code

    if config_file is not None:
        # Each target's state in its own cluster (`loop/run/clusters.py`).
        names = [t.name for t in config_targets(config_file)]
        states = []
        for name in names:
            with connect_target(config_file, name, state_namespace, kubeconfig, kube_context) as target:
                states.append((name, StateStore(target.state, name, target.namespace).load()))
    else:
        with connect(kubeconfig, kube_context) as client:
            listed = cluster_targets(client, state_namespace)
            states = [(name, StateStore(client, name, state_namespace).load()) for name in listed]
    rows = [target_row(name, state) for name, state in states]
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(render_targets(rows), nl=False)
    outcomes = [s.last_attempted.pass_outcome() for _, s in states if s.last_attempted]
    return worst_exit_code(outcomes)


@click.command("suspend")
@target_options
@config_option
@kube_options
@click.option("--reason", default="", help="Why, for the record (shown by status and get).")
@verbosity_options
@handle_errors
def suspend_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    reason: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Stop applying and correcting a target until `resume` (recorded with who and why).

    A pass running now finishes; later ones do nothing. Exit 1 when the target is suspended already.
    """
    from reconciler.cluster.whoami import requester
    from reconciler.loop.store.operations import TargetRef, suspend

    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as target:
        by = requester(target.state)
        suspend(target.state, TargetRef(target.name, target.namespace), by, reason)
    progress_printer(quiet)(f"{target_name}: suspended by {by}")
    return 0


@click.command("resume")
@target_options
@config_option
@kube_options
@verbosity_options
@handle_errors
def resume_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    verbose: int,
    quiet: bool,
) -> int:
    """Follow Git again after `suspend`; the controller is asked for a pass at once."""
    from reconciler.cluster.whoami import requester
    from reconciler.loop.store.operations import TargetRef, resume

    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as target:
        by = requester(target.state)
        resume(target.state, TargetRef(target.name, target.namespace), by, lease_client=target.lease)
    progress_printer(quiet)(f"{target_name}: resumed by {by}")
    return 0


@click.command("reconcile")
@target_options
@config_option
@kube_options
@click.option(
    "--with-source",
    is_flag=True,
    help="Fetch the Git source first. Every pass fetches anyway; the flag is there for Flux users.",
)
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the pass's record.")
@click.option("--timeout", type=DURATION, default="2m", show_default=True, help="How long to wait.")
@verbosity_options
@handle_errors
def reconcile_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    with_source: bool,
    wait: bool,
    timeout: float,
    verbose: int,
    quiet: bool,
) -> int:
    """Ask the controller holding the target's Lease for a pass now, as a webhook does.

    With --wait, exit as `status` does once the pass recorded something (a pass that finds nothing to do
    records nothing: after --timeout, exit 0 saying so). Exit 4 when no controller holds the Lease.
    """
    from reconciler.cluster.whoami import requester
    from reconciler.errors import EnvironmentProblem, UserError
    from reconciler.loop.store.operations import TargetRef, load_known, request_pass, wait_for_pass
    from reconciler.outcome import worst_exit_code

    del with_source  # every pass fetches first (`loop/passes/reconcile.py`)
    progress = progress_printer(quiet)
    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as connection:
        client = connection.state
        target = TargetRef(connection.name, connection.namespace)
        target_name = target.name
        before = load_known(client, target)
        if before.suspended is not None:
            raise UserError(
                f"suspended since {before.suspended.at} by {before.suspended.by}: no pass applies or "
                "corrects anything; `dra-gitops resume` first",
                where=f"ConfigMap/{target.namespace}/dra-gitops-{target.name}",
            )
        if not request_pass(connection.lease, target, f"reconcile requested by {requester(client)}"):
            raise EnvironmentProblem(
                "no controller holds the target's Lease: nothing to ask for a pass",
                where=f"Lease/{target.namespace}/{target.lease}",
            )
        progress(f"{target_name}: a pass was asked for")
        if not wait:
            return 0
        after = wait_for_pass(client, target, before, timeout)
    if after is None:
        progress(f"{target_name}: nothing new recorded within {timeout:g}s (nothing to do, or still running)")
        return 0
    attempted = after.last_attempted
    record = after.history[0] if after.history else None
    if record is not None:
        click.echo(f"{target_name}: {record.operation} {(record.sha or '')[:12]} {record.outcome}")
    return worst_exit_code([attempted.pass_outcome()] if attempted else [])


@click.command("history")
@target_options
@config_option
@kube_options
@output_option(("text", "json"))
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Records to show, newest first.",
)
@verbosity_options
@handle_errors
def history_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    output: str,
    limit: int,
    verbose: int,
    quiet: bool,
) -> int:
    """A target's history, newest first: id, when, operation, sha, outcome, who, message.

    The id (or the sha) is what `rollback` takes.
    """
    from reconciler.loop.store.operations import TargetRef, load_known
    from reconciler.loop.store.statusview import render_history

    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as target:
        state = load_known(target.state, TargetRef(target.name, target.namespace))
    records = state.history[: max(0, limit)]
    if output == "json":
        data: list[Any] = [r.to_json() for r in records]
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(render_history(records), nl=False)
    return 0


@click.command("abort")
@target_options
@config_option
@kube_options
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the rollback's record.")
@click.option("--timeout", type=DURATION, default="10m", show_default=True, help="How long to wait.")
@verbosity_options
@handle_errors
def abort_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    wait: bool,
    timeout: float,
    verbose: int,
    quiet: bool,
) -> int:
    """Stop the running apply at its next stage boundary (at once while it verifies) and roll back what it
    wrote (recorded with who). An apply paused by `suspend` (a driver rollout between waves) is rolled
    back by the next pass, without `resume`; the target stays suspended.

    The aborted commit is held, as a failed one is, until a newer commit or `retry`. Exit 1 when no apply
    is in progress; with --wait, 0 once rolled back, 5 when the rollback failed.
    """
    from reconciler.cluster.whoami import requester
    from reconciler.loop.store.operations import TargetRef, abort, load_known, wait_for_pass
    from reconciler.loop.store.state import StateStore
    from reconciler.outcome import Outcome, exit_code_of

    progress = progress_printer(quiet)
    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as connection:
        client = connection.state
        target = TargetRef(connection.name, connection.namespace)
        target_name = target.name
        before = load_known(client, target)
        sha = abort(client, target, requester(client), lease_client=connection.lease)
        when = (
            "the next pass rolls back its suspended rollout"
            if before.suspended is not None
            else "the pass stops at its next stage boundary (at once while it verifies)"
        )
        progress(f"{target_name}: abort of {sha[:12]} asked for; {when}")
        if not wait:
            return 0
        after = wait_for_pass(client, target, before, timeout)
        store = StateStore(client, target.name, target.namespace)
        deadline = time.monotonic() + timeout
        # Until the rollback is done: the first record may be the aborted apply's, its rollback running.
        while after is not None and after.in_progress is not None and time.monotonic() < deadline:
            time.sleep(0.5)
            after = store.load()
    attempted = after.last_attempted if after is not None else None
    if attempted is None or attempted.sha != sha:
        progress(f"{target_name}: nothing recorded within {timeout:g}s")
        return 4
    click.echo(f"{target_name}: {sha[:12]} {attempted.outcome}, {attempted.pass_outcome()}")
    outcome = attempted.pass_outcome()
    return 0 if outcome == Outcome.ROLLED_BACK else exit_code_of(str(outcome))


@click.command("diff")
@git_target_options
@kube_options
@click.option("--revision", help="The revision to compare with (default: the head the target follows).")
@click.option("--no-diff", is_flag=True, help="Only the summary, no per-object diff.")
@output_option(("text", "json", "markdown"))
@verbosity_options
@handle_errors
def diff_command(**kwargs: Any) -> int:
    """The live cluster against a target's head (or --revision), per object, as `plan` shows a directory.

    A server-side dry-run of that revision against the target's ApplySet: nothing is written, but the API
    server authorises a dry-run as the write it would be (the deployer's rights, not the operator role's).
    Exit 0 when the cluster already matches, 3 when it differs, 1 when the server rejects an object, the
    target is unknown or the revision is not in the repository, 4 when the cluster or the Git remote
    cannot be reached.
    """
    from reconciler.cluster import applyset
    from reconciler.cluster.apply import dry_run, render_plan
    from reconciler.delivery.pipeline import delivered_manifests, stale_manifests
    from reconciler.errors import EnvironmentProblem, UserError
    from reconciler.loop.passes.keep import KeptRevision
    from reconciler.loop.passes.revisions import GitRevisions
    from reconciler.loop.run.clusters import connect_target as connect_to
    from reconciler.loop.run.clusters import select_target
    from reconciler.loop.run.worker import git_source_for
    from reconciler.loop.store.operations import TargetRef, load_known
    from reconciler.model.plan import compute_plan

    targets = targets_of(kwargs)
    target = select_target(targets, kwargs["target_name"], str(kwargs["config_file"] or "--config"))
    with connect_to(
        targets, target.name, target.state_namespace, kwargs["kubeconfig"], kwargs["kube_context"]
    ) as connection:
        client = connection.state  # the target's cluster: its objects and kept copy
        revisions = GitRevisions(
            git_source_for(target, target_cache_dir(kwargs["cache_dir"])),
            kept=KeptRevision(client, target.name, target.state_namespace),
        )
        load_known(client, TargetRef(target.name, target.state_namespace))  # no ApplySet: nothing to compare
        try:
            head = revisions.head().sha
            try:
                desired = revisions.desired(kwargs["revision"] or head)
            except EnvironmentProblem as exc:
                if not kwargs["revision"]:
                    raise
                # The remote answered (the head was fetched): the revision asked for is not in it.
                raise UserError(
                    f"no revision {kwargs['revision']!r} in the repository: {exc.detail}", where=target.repo
                ) from exc
        finally:
            revisions.close()
        manifests = delivered_manifests(desired)  # as a pass writes them (OnDelete for drivers in waves)
        set_id = applyset.applyset_id(target.name, target.state_namespace)
        plan = compute_plan(stale_manifests(client, set_id, manifests), manifests)
        shown = (desired.revision.sha or "")[:12]
        progress_printer(kwargs["quiet"])(f"{target.name}: {shown} against {client.host}")
        result = dry_run(client, plan, applyset_id=set_id)
    text = render_plan(
        result, kwargs["output"], show_diff=not kwargs["no_diff"], revision=desired.revision.sha
    )
    click.echo(text, nl=False)
    if not result.ok:
        return 1
    return 3 if result.changes_pending else 0


@click.command("approve")
@click.argument("sha")
@target_options
@config_option
@kube_options
@verbosity_options
@handle_errors
def approve_command(
    sha: str,
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    verbose: int,
    quiet: bool,
) -> int:
    """Approve the commit a target with `approval: manual` awaits (recorded with who and when).

    Only the commit its controller recorded as awaiting approval is accepted (`status` shows it); any
    other, or an unknown target, is refused with the reason (exit 1). The controller is asked for a pass
    at once, which delivers the commit.
    """
    from reconciler.cluster.whoami import requester
    from reconciler.errors import UserError
    from reconciler.loop.promotion.approval import approve_then_wake
    from reconciler.loop.run.clusters import select_target
    from reconciler.loop.store.operations import TargetRef

    targets = config_targets(config_file)
    if targets is not None:
        found = select_target(targets, target_name, str(config_file))
        if found.gates.approval != "manual":
            raise UserError(
                f"target {target_name!r} does not ask for approval (`approval: manual`): nothing to approve",
                where=found.origin,
            )
    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as target:
        by = requester(target.state)
        approval, not_woken = approve_then_wake(
            target.state, TargetRef(target.name, target.namespace), sha, by, lambda: target.lease
        )
    if not_woken is None:
        progress_printer(quiet)(f"{target_name}: {approval.sha} approved by {by}; a pass was asked for")
    else:
        progress_printer(quiet)(
            f"{target_name}: {approval.sha} approved by {by}; the controller takes it at its next poll "
            f"(it could not be woken: {not_woken})"
        )
    click.echo(f"{target_name}: {approval.sha} approved by {by} at {approval.approved_at}")
    return 0
