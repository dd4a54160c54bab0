"""The cluster of each target: its state ConfigMap, kept last-good copy, ApplySet parent, Events and objects.

A target of the `run --config` file may name a cluster of its own (`kubeconfig`, `context`); the others
live in the controller's cluster. Leases always stay in the controller's cluster, where the replicas meet,
so the clients here serve the state and the objects only. A kubeconfig is read when the targets are
checked (a missing file or an unknown context is a config error naming the key's `path:line`); clients are
built once per cluster and never contact it until a pass does, so a cluster that cannot be reached delays
its own targets only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster.client import ClusterClient
from reconciler.errors import EnvironmentProblem, UserError
from reconciler.loop.config.targets import ClusterRef, Target

# The probe of a target's own cluster before its passes: given up on quickly, so one dead cluster costs
# its own worker seconds, not the pass's full request deadlines.
PROBE_TIMEOUT = 5.0


def default_kubeconfigs(kubeconfig: str | None) -> list[str]:
    """The files the controller's own connection reads: --kubeconfig, else $KUBECONFIG's, else ~/.kube/config."""
    if kubeconfig:
        return [kubeconfig]
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [str(Path.home() / ".kube" / "config")]


def _contexts(path: str, where: str) -> tuple[list[str], str | None]:
    """The context names of a kubeconfig file and its current-context; a config error naming `where`."""
    file = Path(path)
    if not file.is_file():
        raise UserError(f"kubeconfig {path!r} does not exist or is not a file", where=where)
    try:
        document = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"kubeconfig {path!r} cannot be read: {exc}", where=where) from exc
    if not isinstance(document, dict):
        raise UserError(f"kubeconfig {path!r} is not a kubeconfig (no mapping)", where=where)
    names = [
        str(item.get("name"))
        for item in document.get("contexts") or []
        if isinstance(item, dict) and item.get("name")
    ]
    current = document.get("current-context")
    return names, str(current) if current else None


def check_cluster(ref: ClusterRef, controller_kubeconfig: str | None) -> None:
    """The kubeconfig exists and has the context (or a current one); else a config error at the key."""
    if ref.kubeconfig:
        names, current = _contexts(ref.kubeconfig, ref.kubeconfig_where)
        files = [ref.kubeconfig]
    else:
        files = [f for f in default_kubeconfigs(controller_kubeconfig) if Path(f).is_file()]
        if not files:
            raise UserError(
                "`context` without `kubeconfig` picks a context of the controller's kubeconfig, and there "
                "is none (--kubeconfig, $KUBECONFIG, ~/.kube/config)",
                where=ref.context_where,
            )
        names, current = [], None
        for file in files:
            more, first_current = _contexts(file, ref.context_where)
            names += more
            current = current or first_current
    if ref.context and ref.context not in names:
        known = ", ".join(sorted(names)) or "none"
        raise UserError(
            f"context {ref.context!r} is not in {', '.join(files)} (its contexts: {known})",
            where=ref.context_where,
        )
    if not ref.context and (current is None or current not in names):
        raise UserError(
            f"kubeconfig {ref.kubeconfig!r} has no current-context: name one with `context`",
            where=ref.kubeconfig_where,
        )


def check_clusters(targets: Iterable[Target], controller_kubeconfig: str | None) -> None:
    """Every target's own cluster, checked before anything connects (`run`, and verbs given --config)."""
    for target in targets:
        if target.cluster is not None:
            check_cluster(target.cluster, controller_kubeconfig)


class TargetClusters:
    """One client per cluster the targets name (targets naming the same one share it), the controller's
    own for the others. Built from the kubeconfigs only: nothing is sent until a pass asks."""

    def __init__(
        self,
        own: ClusterClient,
        targets: Sequence[Target],
        controller_kubeconfig: str | None = None,
        **limits: Any,
    ) -> None:
        self._built: dict[ClusterRef, ClusterClient] = {}
        self._of: dict[str, ClusterClient] = {}
        for target in targets:
            ref = target.cluster
            if ref is None:
                self._of[target.name] = own
                continue
            client = self._built.get(ref)
            if client is None:
                client = client_for(ref, controller_kubeconfig, **limits)
                self._built[ref] = client
            self._of[target.name] = client

    def client(self, target: Target) -> ClusterClient:
        return self._of[target.name]

    def close(self) -> None:
        for client in self._built.values():
            client.close()


def client_for(ref: ClusterRef, controller_kubeconfig: str | None, **limits: Any) -> ClusterClient:
    """A client of a target's own cluster (nothing sent yet); a kubeconfig the client library cannot use
    (a context naming no cluster or user, a bad certificate) is a config error at the key."""
    try:
        return ClusterClient.from_kubeconfig(
            ref.kubeconfig or controller_kubeconfig, ref.context, in_cluster=False, **limits
        )
    except EnvironmentProblem as exc:
        where = ref.context_where if ref.context else ref.kubeconfig_where
        raise UserError(exc.detail, where=where) from exc


def unreachable(target: Target, client: ClusterClient) -> str | None:
    """Why a target's cluster does not answer one bounded question (its version), naming the cluster;
    None when it answers."""
    try:
        client.bounded(timeout=PROBE_TIMEOUT, retries=1).server_version()
    except EnvironmentProblem as exc:
        ref = target.cluster
        where = ref.describe() if ref is not None else "the controller's cluster"
        return f"its cluster ({where}) cannot be reached: {exc}"
    return None


class TargetConnection:
    """What an operator verb talks to for one target: the target's cluster for its state and objects,
    the controller's (--kubeconfig) for its Lease, connected only when a verb needs the Lease."""

    def __init__(
        self, name: str, namespace: str, state: ClusterClient | None, home: Callable[[], ClusterClient]
    ) -> None:
        self.name = name
        self.namespace = namespace
        self._state = state  # None: the target lives in the controller's cluster
        self._home = home
        self._lease: ClusterClient | None = None

    @property
    def lease(self) -> ClusterClient:
        if self._lease is None:
            self._lease = self._home()
        return self._lease

    @property
    def state(self) -> ClusterClient:
        return self._state if self._state is not None else self.lease

    def close(self) -> None:
        if self._lease is not None:
            self._lease.close()


def select_target(targets: Sequence[Target], name: str, where: str) -> Target:
    """The target called `name` (or the file's only target, when `name` is the default one)."""
    if len(targets) == 1 and name in ("default", targets[0].name):
        return targets[0]
    for target in targets:
        if target.name == name:
            return target
    known = ", ".join(t.name for t in targets)
    raise UserError(f"no target {name!r} (its targets: {known}): give --target NAME", where=where)


@contextmanager
def connect_target(
    targets: Sequence[Target] | None,
    name: str,
    namespace: str,
    kubeconfig: str | None,
    context: str | None,
    where: str = "--config",
    **limits: Any,
) -> Iterator[TargetConnection]:
    """The connection of a verb: with the `run --config` targets, the named target's own cluster (its
    kubeconfig and context win over --kubeconfig/--context) and state namespace; else --kubeconfig's."""

    def home() -> ClusterClient:
        return ClusterClient.from_kubeconfig(kubeconfig, context, **limits)

    target = select_target(targets, name, where) if targets is not None else None
    if target is None or target.cluster is None:
        connection = TargetConnection(
            target.name if target else name, target.state_namespace if target else namespace, None, home
        )
        try:
            yield connection
        finally:
            connection.close()
        return
    check_clusters([target], kubeconfig)
    ref = target.cluster
    state = client_for(ref, kubeconfig, **limits)
    connection = TargetConnection(target.name, target.state_namespace, state, home)
    try:
        yield connection
    finally:
        state.close()
        connection.close()
