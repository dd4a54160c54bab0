"""Commands that read and judge without writing: `check`, `inventory`, `diagnose`, `policy test`, `watch`.

Parse, call, print, return an exit code; the work is in `delivery/check.py`, `delivery/watch.py`,
`cluster/` and `policy/`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from reconciler.cli.options import (
    DURATION,
    check_options,
    color_option,
    connect,
    handle_errors,
    kube_options,
    opa_options,
    opa_timeout_setting,
    output_option,
    policy_options,
    progress_printer,
    use_color,
    verbosity_options,
)
from reconciler.errors import DraGitopsError


@click.command()
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
@click.option(
    "--kubernetes-version",
    metavar="1.MINOR",
    help="The Kubernetes release to judge for offline: its schemas validate the objects and served-versions "
    "judges their API versions (default: the cluster's with --cluster, else the repository config's "
    "`kubernetes_version` param, else the newest bundled schemas).",
)
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
    kubernetes_version: str | None,
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

    With --repo both trees are read straight from Git (no checkout), each with the `dra-gitops.yaml` at
    its own root (`paths`, `charts`, policy `params`). -v prints the plan and how each driver workload
    was recognized.
    """
    from reconciler.delivery.check import CheckOptions, check_git, check_paths, recognized_drivers
    from reconciler.model.openapi import minor_of
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
    if kubernetes_version is not None and minor_of(kubernetes_version) is None:
        raise click.BadParameter(
            f"{kubernetes_version!r} is no Kubernetes version such as 1.36", param_hint="--kubernetes-version"
        )
    options = CheckOptions(
        policy_dirs=policy_dirs,
        opa_url=opa_url,
        opa_token=opa_token,
        opa_timeout=opa_timeout_setting(),
        progress=progress_printer(quiet),
        kubernetes_version=kubernetes_version,
        # The same release for served-versions' offline judgement as for the schemas.
        params={"kubernetes_version": kubernetes_version} if kubernetes_version else {},
    )
    colored = use_color(color, sys.stdout)
    options_out = RenderOptions(color=colored, fail_on_warn=fail_on_warn)
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
        for line in recognized_drivers(run):
            click.echo(f"dra-gitops: {line}", err=True)
        for uninspected in run.result.uninspected:
            click.echo(f"dra-gitops: {uninspected.message}", err=True)
        for unvalidated in run.result.unvalidated:
            click.echo(f"dra-gitops: {unvalidated.message}", err=True)
        if run.result.capacity is not None:
            from reconciler.dra.capacity import render_capacity

            click.echo(render_capacity(run.result.capacity), err=True, nl=False)
    started = time.perf_counter()
    # click strips ANSI codes when stdout is not a terminal unless told otherwise (--color always).
    click.echo(render(run.result, output, options_out), nl=False, color=colored)
    run.timings["report"] = time.perf_counter() - started
    if verbose > 1:
        timings = ", ".join(f"{k} {v:.3f}s" for k, v in run.timings.items())
        click.echo(f"dra-gitops: timings: {timings}", err=True)
    return run.result.exit_code(fail_on_warn)


@click.command()
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


@click.command()
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
    selector-error, prepare-failure, device-taint, pending. Exit 1 when a failure mode was found, 0 when nothing is
    wrong.
    """
    from reconciler.cluster.diagnose import diagnose as run_diagnose
    from reconciler.cluster.diagnose import render_diagnoses

    with connect(kubeconfig, kube_context) as client:
        found = run_diagnose(client, target, namespace=namespace)
    click.echo(render_diagnoses(found, output), nl=False)
    return 1 if any(d.mode != "pending" for d in found) else 0


def opa_options_for_tests(func: Any) -> Any:
    return opa_options(func, "Also run the tests on the OPA server at this URL (it must serve their bundle).")


@click.group()
def policy() -> None:
    """Work with Rego policies."""


@policy.command("test")
@click.argument("dirs", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--run", "name_filter", help="Only tests whose name contains this text.")
@opa_options_for_tests
@output_option(("text", "json"))
@verbosity_options
@handle_errors
def policy_test(
    dirs: tuple[Path, ...],
    name_filter: str | None,
    opa_url: str | None,
    opa_token: str | None,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Run the *_test.rego files in DIRS (default: the bundled policy pack).

    Also reports what OPA would refuse that the embedded engine accepts (docs/policy-guide.md, "OPA and
    the embedded engine"). With --opa-url the tests run on that OPA server too, against the bundle it
    serves, which must be the bundle of the bundled pack and DIRS (`policy bundle --policy-dir DIRS`):
    nothing is written to the server. -o json prints one document.
    """
    from reconciler.policy.compat import check_compatibility
    from reconciler.policy.engine import bundled_policy_dir
    from reconciler.policy.testing import run_policy_tests

    targets = list(dirs) or [bundled_policy_dir()]
    progress = progress_printer(quiet)
    report = run_policy_tests(targets, name_filter)
    differences = check_compatibility(targets)
    reports = [("embedded", report)]
    error: DraGitopsError | None = None
    if opa_url:
        from reconciler.policy.opa import run_policy_tests_on_opa

        progress(f"running the tests on the OPA server at {opa_url}")
        try:
            reports.append(
                (
                    "opa",
                    run_policy_tests_on_opa(
                        opa_url, targets, name_filter, token=opa_token, timeout=opa_timeout_setting()
                    ),
                )
            )
        except DraGitopsError as exc:
            error = exc
    failed = bool(differences) or any(r.failed or r.errors for _, r in reports)
    if output == "json":
        document = {
            "ok": not failed and error is None,
            "engines": {name: r.to_json() for name, r in reports},
            "opa_differences": [d.to_json() for d in differences],
            "errors": [str(error)] if error else [],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        for engine_name, engine_report in reports:
            if len(reports) > 1:
                click.echo(f"{engine_name}:")
            click.echo(engine_report.render(verbose=verbose > 0), nl=False)
        for difference in differences:
            click.echo(difference.render())
    if error is not None:
        raise error
    return 1 if failed else 0


@policy.command("bundle")
@click.option(
    "-o",
    "--output",
    "output_path",
    required=True,
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Where to write the bundle (a .tar.gz OPA loads: `opa run --server -b FILE`).",
)
@click.option(
    "--policy-dir",
    "policy_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Extra policy directory, as `check --policy` takes it; repeatable. The bundled pack is always in.",
)
@click.option(
    "--signing-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Sign the bundle (.signatures.json, as `opa build --signing-key`): a PEM private key file, or "
    "a file holding the secret for HS256/384/512. OPA checks it with --verification-key.",
)
@click.option(
    "--signing-alg",
    default="RS256",
    show_default=True,
    type=click.Choice(["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "HS256", "HS384", "HS512"]),
    help="Signing algorithm (with --signing-key).",
)
@verbosity_options
@handle_errors
def policy_bundle(
    output_path: Path,
    policy_dirs: tuple[Path, ...],
    signing_key: Path | None,
    signing_alg: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Write the policies as an OPA bundle for an OPA server to load.

    The bundled pack plus every --policy-dir, the params of their data.json files and a generated entry
    point (package dra.gitops_entrypoint); `.manifest` has roots ["dra"] and a revision that is the
    digest of the policies and data. `check --opa-url` refuses a server whose bundle has another
    revision (exit 4), and writes nothing to it. Prints the revision.
    """
    from reconciler.policy.bundle import build_bundle, sign, tar_gz
    from reconciler.policy.engine import load_policy_set

    bundle = build_bundle(load_policy_set(list(policy_dirs)))
    signatures = sign(bundle, signing_key.read_bytes(), signing_alg) if signing_key else None
    output_path.write_bytes(tar_gz(bundle, signatures))
    progress_printer(quiet)(
        f"wrote {output_path} ({len(bundle.files)} files{', signed' if signatures else ''})"
    )
    click.echo(bundle.revision)
    return 0


@click.command("watch")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@kube_options
@policy_options
@click.option(
    "--cluster", "use_cluster", is_flag=True, help="Also check against the cluster and dry-run there."
)
@click.option(
    "--debounce",
    type=DURATION,
    default="300ms",
    show_default=True,
    help="How long it must be quiet before re-checking.",
)
@output_option(("text", "json", "markdown"))
@verbosity_options
@handle_errors
def watch_command(
    directory: Path,
    kubeconfig: str | None,
    kube_context: str | None,
    policy_dirs: tuple[Path, ...],
    opa_url: str | None,
    opa_token: str | None,
    use_cluster: bool,
    debounce: float,
    output: str,
    verbose: int,
    quiet: bool,
) -> int:
    """Re-check a working copy on every save and print the report (Ctrl-C to stop)."""
    from reconciler.delivery.watch import watch_directory

    client = connect(kubeconfig, kube_context) if use_cluster else None
    return watch_directory(
        directory,
        check_options(policy_dirs, opa_url, opa_token),
        output=output,
        client=client,
        debounce=debounce,
        emit=lambda text: click.echo(text, nl=False),
        progress=progress_printer(quiet),
    )
