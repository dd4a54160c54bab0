"""The `--config` file of `dra-gitops run`: a list of targets, or a mapping with `targets` and `defaults`.

Every error points at the `path:line` of the key or value at fault; each target goes through the same
validation as the single-target flags (`targets.build_target`). Pure: the only input is the text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from reconciler.errors import UserError
from reconciler.loop.config.gates import check_chain
from reconciler.loop.config.targets import (
    CONFIG_KEYS,
    WEBHOOK_KEYS,
    Secret,
    Target,
    WebhookAuth,
    build_target,
    string_value,
)
from reconciler.notify.config import Located, commit_status_from, notifications_from


def load_targets(text: str, path: str) -> list[Target]:
    """Targets of a `--config` file: a list of targets, or a mapping with `targets` and optional `defaults`
    (keys every target inherits unless it sets them)."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            document = _Document(loader, path)
            targets = document.targets(root)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise UserError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", where=where) from exc
    names: dict[tuple[str, str], Target] = {}
    for target in targets:
        first = names.setdefault((target.state_namespace, target.name), target)
        if first is not target:
            raise UserError(
                f"target {target.name!r} is defined twice (first at {first.origin})", where=target.origin
            )
    _check_notification_targets(targets)
    check_chain(targets)
    return targets


def _check_notification_targets(targets: list[Target]) -> None:
    """A notification's `targets` filter names targets of this file."""
    known = {target.name for target in targets}
    for target in targets:
        for notification in target.notifications:
            unknown = sorted((notification.targets or frozenset()) - known)
            if unknown:
                raise UserError(
                    f"`targets` names {unknown[0]!r}, which is no target of this file",
                    where=notification.targets_where,
                )


_Fields = dict[str, tuple[Any, int]]  # key -> (value, line)


class _Document:
    def __init__(self, loader: yaml.SafeLoader, path: str) -> None:
        self.loader = loader
        self.path = path

    def at(self, node: yaml.Node) -> str:
        return f"{self.path}:{node.start_mark.line + 1}"

    def targets(self, root: yaml.Node | None) -> list[Target]:
        if root is None:
            raise UserError("the config file has no targets", where=f"{self.path}:1")
        defaults: _Fields = {}
        items = root
        if isinstance(root, yaml.MappingNode):
            top = self.mapping(root, allowed=("targets", "defaults"))
            if "defaults" in top:
                defaults_node = top["defaults"][0]
                defaults = self.target_fields(defaults_node, in_defaults=True)
            if "targets" not in top:
                raise UserError("the config file has no `targets` list", where=self.at(root))
            items = top["targets"][0]
        if not isinstance(items, yaml.SequenceNode) or not items.value:
            raise UserError("`targets` must be a non-empty list of targets", where=self.at(items))
        built = []
        for item in items.value:
            fields = {**defaults, **self.target_fields(item, in_defaults=False)}
            origin = self.at(item)
            built.append(
                build_target(
                    {key: value for key, (value, _) in fields.items()}, self.where_of(fields, origin), origin
                )
            )
        return built

    def where_of(self, fields: _Fields, origin: str) -> Callable[[str], str]:
        """`path:line` of a key's value; the target's own line for a key it does not set."""

        def where(key: str) -> str:
            return f"{self.path}:{fields[key][1]}" if key in fields else origin

        return where

    def mapping(self, node: yaml.Node, allowed: tuple[str, ...]) -> dict[str, tuple[yaml.Node, int]]:
        """Keys of a mapping node with their value nodes and lines; duplicate or unknown keys refused."""
        if not isinstance(node, yaml.MappingNode):
            raise UserError("expected a mapping of settings", where=self.at(node))
        own = [key for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
        seen: set[str] = set()
        for key_node in own:
            key = self.loader.construct_object(key_node)
            if key in seen:
                raise UserError(f"duplicate key {key!r}", where=self.at(key_node))
            seen.add(key)
        self.loader.flatten_mapping(node)  # `<<: *shared` merges; the target's own keys win
        result: dict[str, tuple[yaml.Node, int]] = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node)
            if key not in allowed:
                hint = ", ".join(allowed)
                raise UserError(f"unknown key {key!r} (expected one of: {hint})", where=self.at(key_node))
            result[str(key)] = (value_node, key_node.start_mark.line + 1)
        return result

    def target_fields(self, node: yaml.Node, *, in_defaults: bool) -> _Fields:
        allowed = tuple(CONFIG_KEYS)
        if in_defaults:
            allowed = tuple(k for k in allowed if k != "name")
        fields: _Fields = {}
        for key, (value_node, line) in self.mapping(node, allowed).items():
            if key == "webhooks":
                fields[key] = (self.webhooks(value_node), line)
            elif key == "commitStatus":
                fields[key] = (commit_status_from(self.located(value_node)), line)
            elif key == "notifications":
                fields[key] = (notifications_from(self.located(value_node)), line)
            elif key == "promoteFrom" and isinstance(value_node, yaml.MappingNode):
                ref = {k: self.scalar(v) for k, (v, _) in self.mapping(value_node, ("ref",)).items()}
                fields[key] = (ref, line)
            else:
                fields[key] = (self.scalar(value_node), line)
        return fields

    def webhooks(self, node: yaml.Node) -> WebhookAuth:
        files = {
            key: Secret(file=string_value(self.scalar(value), key, f"{self.path}:{line}"))
            for key, (value, line) in self.mapping(node, WEBHOOK_KEYS).items()
        }
        return WebhookAuth(
            github_secret=files.get("githubSecretFile"),
            gitlab_token=files.get("gitlabTokenFile"),
            generic_token=files.get("genericTokenFile"),
        )

    def located(self, node: yaml.Node) -> Located:
        """A nested value with the `path:line` of each part (for keys whose settings are mappings and lists)."""
        if isinstance(node, yaml.MappingNode):
            keys = self.mapping(
                node, allowed=tuple(str(self.loader.construct_object(k)) for k, _ in node.value)
            )
            return {key: self.located(value) for key, (value, _) in keys.items()}, self.at(node)
        if isinstance(node, yaml.SequenceNode):
            return [self.located(item) for item in node.value], self.at(node)
        return self.loader.construct_object(node), self.at(node)

    def scalar(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise UserError("expected a single value, not a list or mapping", where=self.at(node))
        return self.loader.construct_object(node)
