"""The simulated store's vocabulary: resource types, the errors it raises, and the JSON-copy helpers.

Kept apart from :mod:`reconciler.sim.store` so the store's parts (watch history, garbage collection),
the built-in kinds (:mod:`reconciler.sim.resources`), validation and the API server share them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import DraGitopsError

Obj = dict[str, Any]
Edit = Callable[[dict], None]  # changes a copy of an object in place (Store.mutate)
ObjList = list[Obj]  # spelled out here because Store.list shadows the builtin inside the class
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True)
class ResourceType:
    """One kind the server knows (for resource.k8s.io, ``version`` is the storage version v1)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    singular: str = ""
    short_names: tuple[str, ...] = ()
    has_generation: bool = True
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    categories: tuple[str, ...] = field(default=())

    @property
    def group_resource(self) -> str:
        """``resourceclaims.resource.k8s.io`` as real error messages spell it (core: just the plural)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class StoreError(DraGitopsError):
    """Base of the store's errors; ``message`` is what the API server puts into the Status.

    The simulated cluster's answer, not our own failure: a direct subclass of ``DraGitopsError``.
    """

    reason = "InternalError"
    code = 500

    def __init__(self, message: str, *, causes: list[dict[str, str]] | None = None, name: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.causes = causes or []
        self.name_hint = name  # the object's name, for the Status details


class NotFound(StoreError):
    reason = "NotFound"
    code = 404


class AlreadyExists(StoreError):
    reason = "AlreadyExists"
    code = 409


class Conflict(StoreError):
    reason = "Conflict"
    code = 409


class Invalid(StoreError):
    reason = "Invalid"
    code = 422


class Forbidden(StoreError):
    reason = "Forbidden"
    code = 403


class Gone(StoreError):
    reason = "Expired"
    code = 410


def clone(o: Any) -> Any:
    """Deep copy of JSON-like data, several times faster than copy.deepcopy."""
    t = type(o)
    if t is dict:
        return {k: clone(v) for k, v in o.items()}
    if t is list:
        return [clone(v) for v in o]
    return o


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# (resourceVersion, "ADDED"|"MODIFIED"|"DELETED", type, stored object)
Change = tuple[int, str, ResourceType, Obj]
Admit = Callable[[ResourceType, Obj, "Obj | None"], None]
NOT_FOUND_NS = "namespaces"
