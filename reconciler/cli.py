"""Command line: parse, call, print, return an exit code. No logic beyond that.

Exit codes (DESIGN.md): 0 success, 1 denied/rejected/failed, 2 usage, 3 plan has changes, 4 environment,
5 rollback failed.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from reconciler import __version__
from reconciler.errors import DraGitopsError, UserError

F = TypeVar("F", bound=Callable[..., Any])

OUTPUT_FORMATS = ("text", "json", "markdown", "sarif", "junit", "github", "codeclimate")


def _use_color(choice: str, stream: Any) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def output_option(formats: tuple[str, ...] = OUTPUT_FORMATS) -> Callable[[F], F]:
    return click.option(
        "-o",
        "--output",
        type=click.Choice(formats),
        default="text",
        show_default=True,
        help="Output format for the result on stdout.",
    )


def color_option(func: F) -> F:
    return click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour the text output (auto: when stdout is a terminal and NO_COLOR is unset).",
    )(func)


def verbosity_options(func: F) -> F:
    func = click.option("-v", "--verbose", count=True, help="More progress on stderr (repeatable).")(func)
    return click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")(func)


def kube_options(func: F) -> F:
    func = click.option(
        "--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig file (default: $KUBECONFIG)."
    )(func)
    return click.option("--context", "kube_context", help="Kubeconfig context to use.")(func)


def policy_options(func: F) -> F:
    func = click.option(
        "--policy",
        "policy_dirs",
        multiple=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="Extra policy directory (Rego modules and data.json); repeatable. The bundled pack always runs.",
    )(func)
    func = click.option(
        "--opa-url",
        envvar="DRA_GITOPS_OPA_URL",
        help="Evaluate with an OPA server at this URL (http://host:port) instead of the embedded engine.",
    )(func)
    return click.option(
        "--opa-token",
        envvar="DRA_GITOPS_OPA_TOKEN",
        help="Bearer token for the OPA server (env DRA_GITOPS_OPA_TOKEN).",
    )(func)


def connect(kubeconfig: str | None, context: str | None) -> Any:
    """A cluster client from a kubeconfig/context (or the in-cluster service account)."""
    from reconciler.cluster.client import ClusterClient

    return ClusterClient.from_kubeconfig(kubeconfig, context)


def progress_printer(quiet: bool) -> Callable[[str], None]:
    def progress(message: str) -> None:
        if not quiet:
            click.echo(f"dra-gitops: {message}", err=True)

    return progress


def handle_errors(func: F) -> F:
    """Turn our errors into one clear line on stderr and the exit code of their class; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            code = func(*args, **kwargs)
        except DraGitopsError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        sys.exit(code or 0)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dra-gitops")
def cli() -> None:
    """GitOps reconciler and policy checker for Kubernetes Dynamic Resource Allocation (DRA).

    \b
    Exit codes:
      0  success, nothing denied
      1  policy denied, dry-run rejected, verification failed, or bad input
      2  usage error
      3  plan: changes pending (with --exit-code)
      4  environment problem: cluster, git remote or OPA server unreachable, DRA API not served
      5  rollback failed: the cluster needs a human
    """


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--repo", type=click.Path(file_okay=False, path_type=Path), help="Git repository to read revisions from."
)
@click.option("--base", "base_rev", help="Base revision (with --repo): the state the change starts from.")
@click.option("--head", "head_rev", default="HEAD", show_default=True, help="Head revision (with --repo).")
@click.option(
    "--path", "subdir", default="", help="Subdirectory of the repository holding the manifests (with --repo)."
)
@click.option(
    "--cluster",
    is_flag=True,
    help="Add live cluster state to the check (needs the cluster edge; see README).",
)
@kube_options
@policy_options
@click.option("--fail-on-warn", is_flag=True, help="Exit 1 on warnings too.")
@output_option()
@color_option
@verbosity_options
@handle_errors
def check(
    paths: tuple[Path, ...],
    repo: Path | None,
    base_rev: str | None,
    head_rev: str,
    subdir: str,
    cluster: bool,
    kubeconfig: str | None,
    kube_context: str | None,
    policy_dirs: tuple[Path, ...],
    opa_url: str | None,
    opa_token: str | None,
    fail_on_warn: bool,
    output: str,
    color: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Check DRA manifests against the policies: offline, or with live cluster data (--cluster).

    \b
    dra-gitops check manifests/                       # files or directories, no base
    dra-gitops check --repo . --base main --head HEAD  # only what changed between two revisions

    With --repo both trees are read straight from Git (no checkout); a `dra-gitops.yaml` at the root of
    the checked tree selects `paths` and sets policy `params`.
    """
    from reconciler.check import CheckOptions, check_git, check_paths
    from reconciler.policy.report import RenderOptions, render
    from reconciler.policy.result import error_result

    if repo is None and (base_rev or subdir):
        raise click.UsageError("--base and --path need --repo")
    if repo is not None and paths:
        raise click.UsageError("give either PATH arguments or --repo, not both")
    if repo is not None and not base_rev:
        raise click.UsageError("--repo needs --base (the revision the change starts from)")
    if repo is None and not paths:
        raise click.UsageError("give at least one PATH, or --repo with --base and --head")
    options = CheckOptions(
        policy_dirs=policy_dirs, opa_url=opa_url, opa_token=opa_token, progress=progress_printer(quiet)
    )
    use_color = _use_color(color, sys.stdout)
    options_out = RenderOptions(color=use_color, fail_on_warn=fail_on_warn)
    try:
        facts = None
        if cluster or kubeconfig or kube_context:
            from reconciler.cluster.facts import collect_facts

            with connect(kubeconfig, kube_context) as client:
                facts = collect_facts(client, options.progress)
        if repo is not None:
            assert base_rev is not None
            run = check_git(repo, base_rev, head_rev, subdir, options, facts)
        else:
            run = check_paths(list(paths), options, facts)
    except DraGitopsError as exc:
        # A CI job reads stdout: a report in the asked format that carries the error, not an empty file.
        # The text report is the error line on stderr alone. The exit code stays the error's.
        if output != "text":
            click.echo(render(error_result(exc), output, options_out), nl=False)
        raise
    if verbose:
        click.echo(run.plan.render(), err=True, nl=False)
        for uninspected in run.result.uninspected:
            click.echo(f"dra-gitops: {uninspected.message}", err=True)
        if run.result.capacity is not None:
            from reconciler.dra.capacity import render_capacity

            click.echo(render_capacity(run.result.capacity), err=True, nl=False)
    started = time.perf_counter()
    # click strips ANSI codes when stdout is not a terminal unless told otherwise (--color always).
    click.echo(render(run.result, output, options_out), nl=False, color=use_color)
    run.timings["report"] = time.perf_counter() - started
    if verbose > 1:
        timings = ", ".join(f"{k} {v:.3f}s" for k, v in run.timings.items())
        click.echo(f"dra-gitops: timings: {timings}", err=True)
    return run.result.exit_code(fail_on_warn)


@cli.command()
@kube_options
@output_option(("text", "json", "markdown"))
@verbosity_options
@handle_errors
def inventory(
    kubeconfig: str | None, kube_context: str | None, output: str, verbose: int, quiet: bool
) -> int:
    """Environment inventory of a cluster's DRA setup (read-only).

    Server version, resource.k8s.io versions served (and deprecated), nodes and readiness, DRA driver pods
    and their health, DeviceClasses, ResourceSlices per driver/pool/node, device totals and allocations,
    pending claims. Exit 4 when the cluster does not serve the DRA API (with what would enable it).
    """
    from reconciler.cluster.inventory import collect_inventory, render_inventory

    with connect(kubeconfig, kube_context) as client:
        progress_printer(quiet)(f"reading the DRA inventory of {client.host}")
        found = collect_inventory(client)
    click.echo(render_inventory(found, output), nl=False)
    return 0


@cli.command()
@click.argument("target", required=False)
@click.option("-n", "--namespace", help="Diagnose every pending claim and pod of this namespace.")
@kube_options
@output_option(("text", "json", "markdown"))
@verbosity_options
@handle_errors
def diagnose(
    target: str | None,
    namespace: str | None,
    kubeconfig: str | None,
    kube_context: str | None,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Explain why a pod or claim has no device: failure mode, evidence and recovery steps.

    \b
    TARGET: pod/NAME, claim/NAME, NS/NAME or NAME (in --namespace); without it, everything pending.
    Failure modes: driver-not-installed, exhaustion, node-failure, version-mismatch, missing-class,
    selector-error, prepare-failure, pending. Exit 1 when a failure mode was found, 0 when nothing is
    wrong.
    """
    from reconciler.cluster.diagnose import diagnose as run_diagnose
    from reconciler.cluster.diagnose import render_diagnoses

    with connect(kubeconfig, kube_context) as client:
        found = run_diagnose(client, target, namespace=namespace)
    click.echo(render_diagnoses(found, output), nl=False)
    return 1 if any(d.mode != "pending" for d in found) else 0


@cli.group()
def policy() -> None:
    """Work with Rego policies."""


@policy.command("test")
@click.argument("dirs", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--run", "name_filter", help="Only tests whose name contains this text.")
@click.option("--opa-url", envvar="DRA_GITOPS_OPA_URL", help="Also run the tests on this OPA server.")
@output_option(("text", "json"))
@verbosity_options
@handle_errors
def policy_test(
    dirs: tuple[Path, ...],
    name_filter: str | None,
    opa_url: str | None,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Run the *_test.rego files in DIRS (default: the bundled policy pack)."""
    from reconciler.policy.engine import bundled_policy_dir
    from reconciler.policy.testing import run_policy_tests

    targets = list(dirs) or [bundled_policy_dir()]
    report = run_policy_tests(targets, name_filter)
    reports = [("embedded", report)]
    if opa_url:
        from reconciler.policy.opa import run_policy_tests_on_opa

        reports.append(("opa", run_policy_tests_on_opa(opa_url, targets, name_filter)))
    failed = False
    for engine_name, engine_report in reports:
        failed = failed or engine_report.failed > 0 or engine_report.errors > 0
        if output == "json":
            click.echo(json.dumps({"engine": engine_name, **engine_report.to_json()}, indent=2))
        else:
            click.echo(engine_report.render(verbose=verbose > 0), nl=False)
    return 1 if failed else 0


def _attach_optional_groups() -> None:
    """Command groups built in their own packages (kept out of this module's imports at startup)."""
    try:
        from reconciler.sim.cli import sim
    except ImportError:  # pragma: no cover - the sim ships with the package
        return
    cli.add_command(sim)
    # The other commands register themselves on `cli` (plan, apply; run, status, rollback, retry, watch;
    # checklist; demo).
    import reconciler.cli_apply  # noqa: F401
    import reconciler.cli_checklist  # noqa: F401
    import reconciler.cli_demo  # noqa: F401
    import reconciler.cli_reconcile  # noqa: F401


_attach_optional_groups()


def main() -> None:
    try:
        cli(prog_name="dra-gitops")
    except UserError as exc:  # pragma: no cover - handled inside commands; kept as a last guard
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
