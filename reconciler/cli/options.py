"""What every command shares: its common options, the cluster connection, error handling and progress.

Importing this module imports click and the error classes only: every command family builds on it, so
nothing heavy (the cluster client, the policy engine, the sim) is imported here but inside functions.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import click

from reconciler.errors import DraGitopsError, UserError

F = TypeVar("F", bound=Callable[..., Any])

OUTPUT_FORMATS = ("text", "json", "markdown", "sarif", "junit", "github", "codeclimate")


def use_color(choice: str, stream: Any) -> bool:
    """Whether to colour text on `stream` for a --color choice (auto: a terminal and NO_COLOR unset)."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


class Duration(click.ParamType):
    """A time as a user writes it, read into seconds: `30s`, `1m30s`, `500ms`, `2h` or plain seconds
    (`loop/config/durations.py` reads a targets file's the same way). Every command's time option takes one."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        from reconciler.loop.config.durations import parse_duration

        try:
            return parse_duration(value, where=param.opts[0] if param is not None else "duration")
        except UserError as exc:
            self.fail(exc.detail, param, ctx)


DURATION = Duration()
GRACE_HELP = "How long a FailedScheduling 'cannot allocate all claims' may persist before verification fails."


def target_options(func: F) -> F:
    """--target and --state-namespace: which target a command delivers, reconciles or reads the state of."""
    func = click.option(
        "--state-namespace",
        default="dra-gitops",
        show_default=True,
        help="Namespace of the target's state ConfigMap, ApplySet parent, Lease and Events.",
    )(func)
    return click.option(
        "--target",
        "target_name",
        default="default",
        show_default=True,
        help="Name of the target: its ApplySet parent, state ConfigMap and Lease are dra-gitops-<target>.",
    )(func)


def grace_option(default: str = "60s", help: str = GRACE_HELP) -> Callable[[F], F]:
    return click.option("--grace", type=DURATION, default=default, show_default=True, help=help)


def timeout_options(func: F) -> F:
    """--stage-timeout and --verify-timeout of a delivery (`delivery/pipeline.py`'s `DeliverOptions`)."""
    func = click.option(
        "--verify-timeout",
        type=DURATION,
        default="5m",
        show_default=True,
        help="How long verification may take.",
    )(func)
    return click.option(
        "--stage-timeout",
        type=DURATION,
        default="5m",
        show_default=True,
        help="How long each stage may take.",
    )(func)


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
    return opa_options(
        func,
        "Evaluate with an OPA server at this URL (http://host:port) that serves the bundle of these "
        "policies (`dra-gitops policy bundle`), instead of the embedded engine.",
    )


def _opa_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--opa-url must be http(s)://host[:port]: anything else is a usage error (exit 2)."""
    if not value:
        return value
    parsed = urlparse(value if "://" in value else f"http://{value}")
    try:
        port_ok = parsed.port is None or parsed.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok:
        raise click.BadParameter(f"{value!r} is not http://host:port or https://host:port", ctx, param)
    return value


def _opa_timeout(ctx: click.Context, _param: click.Parameter, value: float | None) -> None:
    ctx.meta["dra_gitops.opa_timeout"] = value


def opa_timeout_setting() -> float:
    """The --opa-timeout of the running command (30 s when it has none)."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get("dra_gitops.opa_timeout") if ctx is not None else None
    return float(value) if value else 30.0


def opa_options(func: F, url_help: str) -> F:
    """--opa-url (checked: exit 2 when it is no http(s) URL), --opa-token and --opa-timeout."""
    func = click.option("--opa-url", envvar="DRA_GITOPS_OPA_URL", callback=_opa_url, help=url_help)(func)
    func = click.option(
        "--opa-timeout",
        type=Duration(),
        envvar="DRA_GITOPS_OPA_TIMEOUT",
        expose_value=False,
        callback=_opa_timeout,
        help="How long to wait for the OPA server's answer (default 30s); past it: exit 4.",
    )(func)
    return click.option(
        "--opa-token",
        envvar="DRA_GITOPS_OPA_TOKEN",
        help="Bearer token for the OPA server (env DRA_GITOPS_OPA_TOKEN).",
    )(func)


def ui_access_options(func: F) -> F:
    """Who may read the dashboard (`ui`, and `run`'s operator port): `reconciler/ui/auth.py`."""
    for option in reversed(
        [
            click.option(
                "--ui-auth",
                type=click.Choice(["token", "proxy"]),
                default="token",
                show_default=True,
                help="token: the token file's token (a bearer header, or a login form giving a session "
                "cookie); proxy: an authenticating reverse proxy's user header, from --ui-proxy-cidr only.",
            ),
            click.option(
                "--ui-proxy-cidr",
                multiple=True,
                metavar="CIDR",
                help="Addresses of the trusted reverse proxies (repeatable): their user header "
                "(--ui-auth=proxy) and X-Forwarded-Proto are believed.",
            ),
            click.option(
                "--ui-proxy-header",
                default="X-Forwarded-User",
                show_default=True,
                help="The header naming the user the proxy authenticated.",
            ),
            click.option(
                "--ui-host",
                multiple=True,
                metavar="NAME",
                help="Host names the dashboard answers to besides localhost and the loopback addresses "
                "(repeatable; `.example.com` also takes its subdomains). Others get 421.",
            ),
            click.option(
                "--ui-insecure-open",
                is_flag=True,
                help="Serve the dashboard on a non-loopback address without a token or proxy (logged at "
                "every start). Without it, that start is refused.",
            ),
            click.option(
                "--ui-session",
                type=DURATION,
                default="12h",
                show_default=True,
                help="How long a browser's session lasts after it gave the token.",
            ),
        ]
    ):
        func = option(func)
    return func


def ui_access(params: dict[str, Any], token_file: str | None, host: str, where: str = "--listen") -> Any:
    """The dashboard's `Access` from the options of `ui_access_options` and the token file; UserError
    when serving on `host` would open it to the network (see `Access.exposure`), a warning logged when
    --ui-insecure-open does."""
    import logging

    from reconciler.loop.http.wsgi import is_loopback
    from reconciler.ui.auth import Access, parse_cidrs, read_token

    access = Access(
        token=read_token(token_file),
        auth=params["ui_auth"],
        proxy_cidrs=parse_cidrs(params["ui_proxy_cidr"]),
        proxy_header=params["ui_proxy_header"],
        hosts=tuple(params["ui_host"]),
        insecure_open=params["ui_insecure_open"],
        session_seconds=max(60, int(params["ui_session"])),
    )
    warning = access.exposure(host, is_loopback(host), where)
    if warning:
        logging.getLogger("reconciler.ui").warning("%s", warning)
    return access


def check_options(policy_dirs: tuple[Path, ...], opa_url: str | None, opa_token: str | None) -> Any:
    """The policy check's options from --policy, --opa-url, --opa-token and --opa-timeout."""
    from reconciler.delivery.check import CheckOptions

    return CheckOptions(
        policy_dirs=policy_dirs, opa_url=opa_url, opa_token=opa_token, opa_timeout=opa_timeout_setting()
    )


def connect(kubeconfig: str | None, context: str | None, **limits: Any) -> Any:
    """A cluster client from a kubeconfig/context (or the in-cluster service account); `limits` are
    `ClusterClient`'s (`timeout=` seconds per request, `retries=`)."""
    from reconciler.cluster.client import ClusterClient

    return ClusterClient.from_kubeconfig(kubeconfig, context, **limits)


def config_option(func: F) -> F:
    """--config of the verbs on one target: its `run --config` entry says where its cluster and state are."""
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="The `run --config` file: --target's cluster (kubeconfig, context) and state namespace come "
        "from its entry; its Lease stays in --kubeconfig's cluster.",
    )(func)


def config_targets(config_file: Path | None) -> Any:
    """The targets of a `run --config` file (None without one)."""
    if config_file is None:
        return None
    from reconciler.loop.config.targetfile import load_targets

    return load_targets(config_file.read_text(), str(config_file))


def connect_target(
    config_file: Path | None,
    target_name: str,
    state_namespace: str,
    kubeconfig: str | None,
    context: str | None,
    **limits: Any,
) -> Any:
    """A verb's connection to one target (`loop/run/clusters.py`'s `TargetConnection`, a context manager):
    `.state` its cluster (with --config: the target's own), `.lease` the controller's, `.name`,
    `.namespace` (with --config: the target's state namespace)."""
    from reconciler.loop.run import clusters

    targets = config_targets(config_file)
    where = str(config_file) if config_file is not None else "--config"
    return clusters.connect_target(
        targets, target_name, state_namespace, kubeconfig, context, where=where, **limits
    )


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


def wait_for_signal() -> None:
    """Block until SIGTERM or Ctrl-C (`ui`, `demo --keep`: serve until told to stop)."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
