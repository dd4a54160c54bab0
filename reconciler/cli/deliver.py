"""Commands that deliver one revision by hand: `plan` (server-side dry-run) and `apply`.

Parse, call, print, return an exit code; the work is in `delivery/pipeline.py` and `cluster/apply/`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import click

from reconciler.cli.options import (
    F,
    connect,
    grace_option,
    handle_errors,
    kube_options,
    opa_timeout_setting,
    output_option,
    policy_options,
    progress_printer,
    target_options,
    timeout_options,
    verbosity_options,
)


@dataclass(frozen=True)
class DesiredSource:
    """Where the desired state comes from: PATH arguments, or a revision of a Git repository."""

    paths: tuple[Path, ...]
    repo: Path | None
    rev: str
    subdir: str

    def check_usage(self, base_rev: str | None = None) -> None:
        """The usage errors of these arguments, raised before anything connects."""
        if self.repo is not None and self.paths:
            raise click.UsageError("give either PATH arguments or --repo, not both")
        if base_rev and self.repo is None:
            raise click.UsageError("--base needs --repo")
        if self.repo is None and not self.paths:
            raise click.UsageError("give at least one PATH, or --repo (with --rev)")

    def load(self, base_rev: str | None = None) -> tuple[Any, Any]:
        """The desired state, and with `base_rev` the state the cluster runs now (else None)."""
        from reconciler.delivery.desired import load_directories, load_git_revisions
        from reconciler.model.loader import DEFAULT_LIMITS

        self.check_usage(base_rev)
        if self.repo is not None:
            revisions = [self.rev, base_rev] if base_rev else [self.rev]
            loaded = load_git_revisions(self.repo, revisions, self.subdir, DEFAULT_LIMITS)
            return loaded[0], (loaded[1] if base_rev else None)
        return load_directories(list(self.paths), DEFAULT_LIMITS), None


def source_options(func: F) -> F:
    """PATH arguments or --repo/--rev/--path, handed to the command as one `source: DesiredSource`."""

    @functools.wraps(func)
    def collect(
        *args: Any, paths: tuple[Path, ...], repo: Path | None, rev: str, subdir: str, **kwargs: Any
    ) -> Any:
        return func(*args, source=DesiredSource(paths, repo, rev, subdir), **kwargs)

    command: Any = collect
    command = click.option(
        "--path", "subdir", default="", help="Subdirectory of the repository holding the manifests."
    )(command)
    command = click.option(
        "--rev", default="HEAD", show_default=True, help="Revision to deliver (with --repo)."
    )(command)
    command = click.option(
        "--repo",
        type=click.Path(file_okay=False, path_type=Path),
        help="Git repository to read the revision from.",
    )(command)
    return cast(F, click.argument("paths", nargs=-1, type=click.Path(path_type=Path))(command))


@click.command("plan")
@source_options
@kube_options
@target_options
@click.option("--exit-code", is_flag=True, help="Exit 3 when the plan has changes.")
@click.option("--no-diff", is_flag=True, help="Only the summary, no per-object diff.")
@output_option(("text", "json", "markdown"))
@verbosity_options
@handle_errors
def plan_command(
    source: DesiredSource,
    kubeconfig: str | None,
    kube_context: str | None,
    target_name: str,
    state_namespace: str,
    exit_code: bool,
    no_diff: bool,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Server-side dry-run of the whole change, stage by stage: a diff per object, nothing written.

    Objects whose Namespace or CRD the same change creates are shown as deferred: the server cannot judge
    them before their Namespace or CRD exists, and `apply` dry-runs them right after that stage.
    `-o markdown` is made for a pull-request comment or a CI job summary, `-o json` for scripts.
    Exit 0 when the server accepts every object, 1 when it rejects one, 3 with --exit-code when there are
    changes, 4 when the cluster cannot be reached.
    """
    from reconciler.cluster import applyset
    from reconciler.cluster.apply import dry_run, render_plan
    from reconciler.delivery.pipeline import cluster_capabilities_of, delivered_manifests, stale_manifests
    from reconciler.model.plan import compute_plan
    from reconciler.render.capabilities import cluster_capabilities

    source.check_usage()
    with connect(kubeconfig, kube_context) as client:
        with cluster_capabilities(cluster_capabilities_of(client)):  # charts render as for this cluster
            desired, _ = source.load()
        head = delivered_manifests(desired)  # as `apply` writes them (OnDelete for drivers in waves)
        for repeat in desired.duplicates:  # `apply` reports them with its policy check; `plan` runs none
            click.echo(f"warning: {repeat.where}: {repeat.message}", err=True)
        set_id = applyset.applyset_id(target_name, state_namespace)
        plan = compute_plan(stale_manifests(client, set_id, head), head)
        progress_printer(quiet)(f"dry-run of {len(plan.changes)} change(s) against {client.host}")
        result = dry_run(client, plan, applyset_id=set_id)
    text = render_plan(
        result, output, show_diff=not no_diff, revision=desired.revision.sha, skipped=desired.skipped
    )
    click.echo(text, nl=False)
    if not result.ok:
        return 1
    return 3 if exit_code and result.changes_pending else 0


@click.command("apply")
@source_options
@kube_options
@target_options
@policy_options
@timeout_options
@grace_option()
@click.option("--no-prune", is_flag=True, help="Keep objects the revision no longer has.")
@click.option(
    "--base",
    "base_rev",
    help="With --repo: the revision the cluster runs now; policies judge the change from it "
    "(driver-canary needs it to see a driver update).",
)
@output_option(("text", "json"))
@verbosity_options
@handle_errors
def apply_command(
    source: DesiredSource,
    kubeconfig: str | None,
    kube_context: str | None,
    target_name: str,
    state_namespace: str,
    policy_dirs: tuple[Path, ...],
    opa_url: str | None,
    opa_token: str | None,
    stage_timeout: float,
    verify_timeout: float,
    grace: float,
    no_prune: bool,
    base_rev: str | None,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Check, dry-run, apply stage by stage and verify one revision.

    Every claim of every workload must end allocated, reserved for its pod, on the pod's node, and the pod
    Ready; a terminal DRA signal (missing class, exhaustion past --grace, prepare failure, crashing
    driver) fails fast with a diagnosis. Exit 0 applied and verified, 1 denied/rejected/failed, 4 cluster
    problems. (Rollback to the last good revision comes with the reconcile loop.)
    """
    from reconciler.delivery.check import CheckOptions
    from reconciler.delivery.pipeline import DeliverOptions, cluster_capabilities_of, deliver
    from reconciler.render.capabilities import cluster_capabilities

    progress = progress_printer(quiet)
    check_options = CheckOptions(
        policy_dirs=policy_dirs,
        opa_url=opa_url,
        opa_token=opa_token,
        opa_timeout=opa_timeout_setting(),
        progress=progress,
    )
    options = DeliverOptions(
        target=target_name,
        namespace=state_namespace,
        stage_timeout=stage_timeout,
        verify_timeout=verify_timeout,
        grace=grace,
        prune=not no_prune,
    )
    source.check_usage(base_rev)
    with connect(kubeconfig, kube_context) as client:
        with cluster_capabilities(cluster_capabilities_of(client)):  # charts render as for this cluster
            desired, base = source.load(base_rev)
        delivery = deliver(client, desired, check_options, options, progress, base)
    click.echo(delivery.render_json() if output == "json" else delivery.render_text(), nl=False)
    return delivery.outcome.exit_code
