"""Commands of the long-running reconciler: `run`, `status`, `retry` (`rollback` and `sync` are in
`revisions.py`).

Parse, call, print, return an exit code; the work is in `loop/` (controller, reconcile, state).
"""

from __future__ import annotations

import json
import logging
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from reconciler.cli import options as shared_options
from reconciler.cli.options import (
    DURATION,
    F,
    check_options,
    config_option,
    connect,
    connect_target,
    handle_errors,
    kube_options,
    output_option,
    progress_printer,
    target_options,
    verbosity_options,
)

log = logging.getLogger("dra_gitops.controller")


def git_target_options(func: F) -> F:
    """One target given by flags (or many with --config)."""
    options: list[Callable[[F], F]] = [
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="YAML file listing several targets (repo, branch, path, stateNamespace, ...).",
        ),
        click.option(
            "--repo", help="Git URL to follow (https://, ssh://, git@host:path, file:// or a path)."
        ),
        click.option("--branch", help="Branch to follow (default main)."),
        click.option(
            "--tag-pattern",
            help="Follow the newest tag matching this pattern (e.g. 'v*') instead of a branch.",
        ),
        click.option(
            "--path",
            "subdir",
            default=".",
            show_default=True,
            help="Sub-path of the repository holding the manifests.",
        ),
        target_options,
        shared_options.grace_option(),
        click.option(
            "--ssh-key-file", type=click.Path(dir_okay=False), help="SSH private key for the Git remote."
        ),
        click.option(
            "--known-hosts-file", type=click.Path(dir_okay=False), help="known_hosts for the SSH remote."
        ),
        click.option(
            "--token-file",
            type=click.Path(dir_okay=False),
            help="File holding an HTTPS token for the Git remote.",
        ),
        click.option(
            "--gpg-keyring",
            type=click.Path(dir_okay=False),
            help="Only apply commits signed by a key of this GPG keyring.",
        ),
        click.option(
            "--ssh-allowed-signers",
            type=click.Path(dir_okay=False),
            help="Only apply commits SSH-signed by a key of this allowed-signers file.",
        ),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False, path_type=Path),
            help="Where Git clones are cached (default: a temporary directory).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def targets_of(kwargs: dict[str, Any], extra: dict[str, Any] | None = None) -> list[Any]:
    from reconciler.loop.config.targetfile import load_targets
    from reconciler.loop.config.targets import target_from_flags

    config_file: Path | None = kwargs.get("config_file")
    if config_file is not None:
        if kwargs.get("repo"):
            raise click.UsageError("give --config or --repo, not both")
        return load_targets(config_file.read_text(), str(config_file))
    if not kwargs.get("repo"):
        raise click.UsageError("give --repo URL (one target) or --config FILE (several)")
    return [
        target_from_flags(
            repo=kwargs["repo"],
            name=kwargs["target_name"],
            branch=kwargs.get("branch") or (None if kwargs.get("tag_pattern") else "main"),
            tag_pattern=kwargs.get("tag_pattern"),
            path=kwargs.get("subdir") or ".",
            state_namespace=kwargs["state_namespace"],
            grace=kwargs["grace"],
            ssh_key_file=kwargs.get("ssh_key_file"),
            known_hosts_file=kwargs.get("known_hosts_file"),
            token_file=kwargs.get("token_file"),
            gpg_keyring=kwargs.get("gpg_keyring"),
            ssh_allowed_signers=kwargs.get("ssh_allowed_signers"),
            **(extra or {}),
        )
    ]


def target_cache_dir(value: Path | None) -> Path:
    return value if value is not None else Path(tempfile.mkdtemp(prefix="dra-gitops-cache-"))


@click.command("run")
@git_target_options
@kube_options
@shared_options.policy_options
@click.option(
    "--poll-interval",
    type=DURATION,
    default="30s",
    show_default=True,
    help="How often to fetch (jittered ±10%).",
)
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    help="HOST:PORT of the operator port: /healthz, /readyz, /metrics and the dashboard at / (and the "
    "webhooks, without --webhook-listen). In a pod: 0.0.0.0:8080 with a token or --ui-auth=proxy.",
)
@click.option(
    "--webhook-listen",
    metavar="HOST:PORT",
    help="A listener of its own for /hooks/{github,gitlab,generic} only: what an Ingress may publish.",
)
@click.option(
    "--ui-token-file",
    type=click.Path(dir_okay=False),
    help="File holding the token the dashboard at / then needs (at least 32 bytes; probes, metrics and "
    "hooks keep theirs). Required on a non-loopback --listen, unless --ui-auth=proxy.",
)
@shared_options.ui_access_options
@click.option("--webhook-secret", help="GitHub webhook secret (HMAC-SHA256 of X-Hub-Signature-256).")
@click.option(
    "--webhook-secret-file", type=click.Path(dir_okay=False), help="File holding the GitHub webhook secret."
)
@click.option("--webhook-token", help="Token for /hooks/gitlab (X-Gitlab-Token) and /hooks/generic (Bearer).")
@click.option("--webhook-token-file", type=click.Path(dir_okay=False), help="File holding the webhook token.")
@click.option(
    "--webhook-max-body",
    "webhook_max_body_mib",
    type=click.IntRange(min=1),
    default=25,
    show_default=True,
    metavar="MIB",
    help="Largest webhook body accepted, in MiB (GitHub sends pushes up to 25 MB).",
)
@click.option(
    "--git-revert",
    "git_revert_branch",
    metavar="BRANCH",
    help="After a rollback, push a revert commit of the failed commit to BRANCH for review.",
)
@click.option("--identity", help="This replica's Lease holder identity (default: hostname and thread id).")
@click.option(
    "--lease-duration",
    type=DURATION,
    default="15s",
    show_default=True,
    help="How long a Lease lasts unrenewed.",
)
@shared_options.timeout_options
@click.option(
    "--request-timeout",
    type=DURATION,
    default="10s",
    show_default=True,
    help="How long one request may wait for the API server's answer (connect and read).",
)
@click.option(
    "--concurrent",
    "concurrent_passes",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Passes this replica runs at once; the other targets' passes wait for one to finish.",
)
@click.option(
    "--once", is_flag=True, help="One pass per target this replica holds, then exit (exit code of the worst)."
)
@click.option("--log-format", type=click.Choice(["plain", "json"]), default="plain", show_default=True)
@verbosity_options
@handle_errors
def run_command(**kwargs: Any) -> int:
    """Follow Git and keep the cluster on the last good commit; roll back on failure.

    Each pass: fetch, check policies against the last good revision, server-side dry-run, staged apply,
    verify every claim, prune, record (state ConfigMap dra-gitops-<target>, Events, /metrics). A failure
    after any write rolls back to the last good revision. A failed commit is not retried until a newer
    commit or `dra-gitops retry`. SIGTERM stops at the next stage boundary and exits 0 (5 when a
    rollback failed and the cluster needs a human).
    """
    from reconciler.cli.logsetup import configure_logging
    from reconciler.loop.httpserver import parse_listen
    from reconciler.loop.run.clusters import check_clusters
    from reconciler.loop.run.controller import Controller
    from reconciler.loop.run.settings import ControllerOptions
    from reconciler.outcome import stopped_exit_code
    from reconciler.ui.build import controller_dashboard

    configure_logging(kwargs["verbose"], kwargs["quiet"], kwargs["log_format"])
    extra = {
        "poll_interval": kwargs["poll_interval"],
        "git_revert_branch": kwargs["git_revert_branch"],
        "webhook_secret": kwargs["webhook_secret"],
        "webhook_secret_file": kwargs["webhook_secret_file"],
        "webhook_token": kwargs["webhook_token"],
        "webhook_token_file": kwargs["webhook_token_file"],
    }
    targets = targets_of(kwargs, extra)
    check_clusters(targets, kwargs["kubeconfig"])  # the targets' own kubeconfigs, before connecting
    host, port = parse_listen(kwargs["listen"])
    options = ControllerOptions(
        cache_dir=target_cache_dir(kwargs["cache_dir"]),
        host=host,
        port=port,
        identity=kwargs["identity"] or "",
        lease_duration=kwargs["lease_duration"],
        renew_deadline=kwargs["lease_duration"] * 2 / 3,
        retry_period=max(0.2, kwargs["lease_duration"] / 7),
        stage_timeout=kwargs["stage_timeout"],
        verify_timeout=kwargs["verify_timeout"],
        max_body=kwargs["webhook_max_body_mib"] * 1024 * 1024,
        concurrent_passes=kwargs["concurrent_passes"],
        check=check_options(kwargs["policy_dirs"], kwargs["opa_url"], kwargs["opa_token"]),
        kubeconfig=kwargs["kubeconfig"],
        request_timeout=kwargs["request_timeout"],
    )
    # Before connecting anywhere: a bad token file or an open dashboard is a config error.
    access = shared_options.ui_access(kwargs, kwargs["ui_token_file"], host)
    webhook = parse_listen(kwargs["webhook_listen"], "--webhook-listen") if kwargs["webhook_listen"] else None
    client = connect(kwargs["kubeconfig"], kwargs["kube_context"], timeout=kwargs["request_timeout"])
    controller = Controller(client, targets, options)
    if webhook is not None:
        controller.server.webhook_host, controller.server.webhook_port = webhook
    # Built on the controller: it reads each target through the controller's client of its cluster.
    controller.server.pages = controller_dashboard(controller, access=access)
    if kwargs["once"]:
        return _run_once(controller)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    bound = controller.start()
    log.info("reconciling %d target(s); serving on %s:%d", len(targets), host, bound)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        controller.stop()
    return stopped_exit_code(r.outcome for r in controller.last_results.values())


def _run_once(controller: Any) -> int:
    """A pass of every target this replica can hold; a line per pass, the exit code of the worst."""
    from reconciler.outcome import worst_exit_code

    results = controller.run_once()
    outcomes = []
    for name in (target.name for target in controller.targets):
        if name not in results:
            log.warning("another replica holds the lease; skipped", extra={"target": name})
            continue
        result = results[name]
        if result is not None:
            click.echo(f"{name}: {result.outcome} {result.sha or ''} {result.message}".rstrip())
            outcomes.append(result.outcome)
    return worst_exit_code(outcomes)


@click.command("status")
@target_options
@config_option
@kube_options
@output_option(("text", "json"))
@click.option(
    "--history", "history_count", type=int, default=10, show_default=True, help="History records to show."
)
@verbosity_options
@handle_errors
def status_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    output: str,
    history_count: int,
    verbose: int,
    quiet: bool,
) -> int:
    """Last good, last attempted and in-progress revision of a target, and its history of passes.

    Exit 0 when the last attempt applied, 1 when it failed (or was rolled back), 5 when a rollback failed.
    """
    from reconciler.loop.store.operations import TargetRef, load_known
    from reconciler.outcome import worst_exit_code

    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as target:
        state = load_known(target.state, TargetRef(target.name, target.namespace))
        target_name = target.name
    if output == "json":
        data = state.to_json()
        data["history"] = data["history"][: max(0, history_count)] if history_count >= 0 else data["history"]
        click.echo(json.dumps(data, indent=2))
    else:
        from reconciler.loop.store.statusview import render_status

        click.echo(render_status(target_name, state, history_count), nl=False)
    outcome = state.last_attempted.pass_outcome() if state.last_attempted else None
    return worst_exit_code([outcome] if outcome else [])


@click.command("retry")
@target_options
@config_option
@kube_options
@click.option("--sha", help="The sha to try again (default: the last attempted one).")
@verbosity_options
@handle_errors
def retry_command(
    target_name: str,
    state_namespace: str,
    config_file: Path | None,
    kubeconfig: str | None,
    kube_context: str | None,
    sha: str | None,
    verbose: int,
    quiet: bool,
) -> int:
    """Let the reconciler try a failed (or held) commit again, at once: the controller holding the
    target's Lease is asked for a pass."""
    from reconciler.loop.store.operations import TargetRef, load_known, request_pass, retry_choice
    from reconciler.loop.store.state import StateStore

    chosen: list[str] = []

    def mark(state: Any) -> None:
        wanted = retry_choice(state, sha, store.ref)
        state.retry = wanted
        if state.hold == wanted:
            state.hold = None
        chosen[:] = [wanted]

    with connect_target(config_file, target_name, state_namespace, kubeconfig, kube_context) as target:
        target_name = target.name
        load_known(target.state, TargetRef(target.name, target.namespace))
        store = StateStore(target.state, target.name, target.namespace)
        store.update(mark)
        # At once, not at the next poll: the controller holding the Lease (in its cluster) is asked for a pass.
        ref = TargetRef(target.name, target.namespace)
        woke = request_pass(target.lease, ref, f"retry of {chosen[0][:12]}")
    when = "now" if woke else "on the next pass (no controller holds the target's Lease)"
    progress_printer(quiet)(f"{target_name}: {chosen[0]} will be tried again {when}")
    return 0
