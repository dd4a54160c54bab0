"""`dra-gitops ui`: the web dashboard from a laptop or a CI job (read-only: the `dra-reader` role is enough).

Parse, call, print, return an exit code; the pages are `reconciler/ui/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from reconciler.cli.options import (
    connect,
    handle_errors,
    kube_options,
    progress_printer,
    ui_access,
    ui_access_options,
    verbosity_options,
    wait_for_signal,
)


@click.command("ui")
@kube_options
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The `run --config` file: its targets, their state namespaces, clusters (a target's own "
    "`kubeconfig`/`context`: its state and devices are read there) and Git sources (commit subjects, "
    "authors and policy reports). Default: every target whose state is in --state-namespace.",
)
@click.option(
    "--state-namespace",
    default="dra-gitops",
    show_default=True,
    help="Namespace of the state ConfigMaps (with --config: each target's own).",
)
@click.option(
    "--listen",
    default="127.0.0.1:8090",
    show_default=True,
    help="HOST:PORT to serve on (only this machine unless told otherwise).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="File holding the token every page then needs (at least 32 bytes; a browser gives it once in "
    "the login form and keeps a session). Required on a non-loopback --listen, unless --ui-auth=proxy.",
)
@ui_access_options
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the targets' Git clones are kept, with --config (default: a temporary directory).",
)
@verbosity_options
@handle_errors
def ui_command(
    kubeconfig: str | None,
    kube_context: str | None,
    config_file: Path | None,
    state_namespace: str,
    listen: str,
    token_file: str | None,
    cache_dir: Path | None,
    verbose: int,
    quiet: bool,
    **access_options: Any,
) -> int:
    """Serve the dashboard: targets, each target's history, commits' policy reports and the device map.

    GET only, every value escaped, no Secret read. Stops on Ctrl-C or SIGTERM (exit 0).
    """
    from reconciler.cli.logsetup import configure_logging
    from reconciler.cli.loop import target_cache_dir
    from reconciler.loop.config.targetfile import load_targets
    from reconciler.loop.httpserver import parse_listen
    from reconciler.loop.run.clusters import TargetClusters, check_clusters
    from reconciler.ui.build import build_dashboard
    from reconciler.ui.places import READ_TIMEOUT
    from reconciler.ui.server import DashboardServer

    configure_logging(verbose, quiet, "plain")
    host, port = parse_listen(listen)
    access = ui_access(access_options, token_file, host)
    targets = load_targets(config_file.read_text(), str(config_file)) if config_file is not None else None
    if targets is not None:  # the targets' own kubeconfigs and contexts, before connecting
        check_clusters(targets, kubeconfig)
    with connect(kubeconfig, kube_context) as client:
        # Targets naming a cluster of their own are read there (clients built now, nothing sent yet).
        clusters = TargetClusters(client, targets, kubeconfig, timeout=READ_TIMEOUT) if targets else None
        dashboard = build_dashboard(
            client,
            targets=targets,
            state_namespace=state_namespace,
            cache_dir=target_cache_dir(cache_dir) if targets is not None else None,
            fetch=True,
            access=access,
            clusters=clusters,
            home_label=f"--kubeconfig's cluster ({client.host})",
        )
        server = DashboardServer(dashboard, host, port)
        bound = server.start()
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"http://{shown}:{bound}/")
        progress_printer(quiet)(f"dashboard of {client.host} on http://{shown}:{bound}/ (Ctrl-C stops)")
        try:
            wait_for_signal()
        finally:
            server.stop()
            if clusters is not None:
                clusters.close()
    return 0
