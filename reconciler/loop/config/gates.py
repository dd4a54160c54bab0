"""The promotion gates of a target (`run --config`): which upstream it takes commits from, the soak time,
manual approval, and the rollback rehearsal. Kargo's stages, judged by DRA verification.

    - name: production
      promoteFrom: staging            # a target of the same file; or {ref: refs/dra-gitops/staging/verified}
      soak: 10m                       # the upstream has held the commit as its last good this long
      approval: manual                # `dra-gitops approve --target production SHA`
      requireRehearsal: true          # the upstream rehearsed the commit's rollback

Pure: the config's values in, a `Gates` or a `UserError` naming `path:line` out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.errors import UserError
from reconciler.loop.config.durations import parse_duration

# The keys this block adds to a target of the config file.
GATE_KEYS = ("promoteFrom", "soak", "approval", "requireRehearsal", "rehearseRollback", "publishVerified")
APPROVALS = ("auto", "manual")
VERIFIED_REF = "refs/dra-gitops/{target}/verified"
_REF = re.compile(r"^refs/[A-Za-z0-9._/-]+$")


@dataclass(frozen=True)
class Gates:
    """What a target takes from upstream, and what it does for its downstreams."""

    upstream: str | None = None  # `promoteFrom: <target>`: a target of the same config
    upstream_ref: str | None = None  # `promoteFrom: {ref: ...}`: a ref of this target's own repository
    soak: float = 0.0
    approval: str = "auto"
    require_rehearsal: bool = False
    rehearse_rollback: bool = False
    publish_verified: bool = False
    # `path:line` of `promoteFrom`, for errors about the chain of targets.
    where: str = field(default="", compare=False)

    @property
    def promoted(self) -> bool:
        """Whether the target takes only what an upstream verified (else it follows its branch's head)."""
        return self.upstream is not None or self.upstream_ref is not None


def build_gates(fields: Mapping[str, Any], where_of: Callable[[str], str]) -> Gates:
    source = fields.get("promoteFrom")
    upstream: str | None = None
    upstream_ref: str | None = None
    if isinstance(source, str) and source.strip():
        upstream = source.strip()
    elif isinstance(source, Mapping) and set(source) == {"ref"} and isinstance(source["ref"], str):
        upstream_ref = source["ref"].strip()
        if not _REF.match(upstream_ref) or ".." in upstream_ref or upstream_ref.endswith((".lock", "/")):
            raise UserError(
                f"`promoteFrom.ref` {upstream_ref!r} must be a full Git ref "
                f"(e.g. {VERIFIED_REF.format(target='staging')})",
                where=where_of("promoteFrom"),
            )
    elif source is not None:
        raise UserError(
            "`promoteFrom` must name a target of this file, or be {ref: refs/dra-gitops/<target>/verified}",
            where=where_of("promoteFrom"),
        )
    soak = parse_duration(fields.get("soak", 0), where_of("soak"))
    approval = fields.get("approval", "auto")
    if approval not in APPROVALS:
        raise UserError(
            f"`approval` must be one of {', '.join(APPROVALS)}, not {approval!r}", where=where_of("approval")
        )
    gates = Gates(
        upstream=upstream,
        upstream_ref=upstream_ref,
        soak=soak,
        approval=str(approval),
        require_rehearsal=_switch(fields, "requireRehearsal", where_of),
        rehearse_rollback=_switch(fields, "rehearseRollback", where_of),
        publish_verified=_switch(fields, "publishVerified", where_of),
        where=where_of("promoteFrom"),
    )
    if not gates.promoted:
        for key, value in (
            ("soak", soak),
            ("approval", approval == "manual"),
            ("requireRehearsal", gates.require_rehearsal),
        ):
            if value:
                raise UserError(
                    f"`{key}` gates what comes from upstream: it needs `promoteFrom`", where=where_of(key)
                )
    if gates.upstream_ref and gates.require_rehearsal:
        raise UserError(
            "`requireRehearsal` cannot be checked through a published ref; the upstream publishes a commit "
            "only after its rehearsal when it has `rehearseRollback: true`",
            where=where_of("requireRehearsal"),
        )
    return gates


def _switch(fields: Mapping[str, Any], key: str, where_of: Callable[[str], str]) -> bool:
    value = fields.get(key, False)
    if not isinstance(value, bool):
        raise UserError(f"`{key}` must be true or false, not {value!r}", where=where_of(key))
    return value


class _Gated(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def gates(self) -> Gates: ...


def check_chain(targets: Sequence[_Gated]) -> None:
    """Every `promoteFrom` names one target of the file, and no chain of them comes back on itself."""
    by_name: dict[str, list[_Gated]] = {}
    for target in targets:
        by_name.setdefault(target.name, []).append(target)
    for target in targets:
        upstream = target.gates.upstream
        if upstream is None:
            continue
        found = by_name.get(upstream, [])
        if not found:
            known = ", ".join(sorted(by_name)) or "none"
            raise UserError(
                f"`promoteFrom` names an unknown target {upstream!r} (targets: {known})",
                where=target.gates.where,
            )
        if len(found) > 1:
            raise UserError(
                f"`promoteFrom` {upstream!r} is ambiguous: two targets of that name in different namespaces",
                where=target.gates.where,
            )
        if upstream == target.name:
            raise UserError(f"target {target.name!r} cannot promote from itself", where=target.gates.where)
    for target in targets:
        chain = [target.name]
        current = target
        while current.gates.upstream is not None:
            current = by_name[current.gates.upstream][0]
            if current.name in chain:
                cycle = " → ".join([*chain[chain.index(current.name) :], current.name])
                raise UserError(f"promotion cycle: {cycle}", where=target.gates.where)
            chain.append(current.name)
