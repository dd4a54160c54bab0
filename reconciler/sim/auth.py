"""Who is asking: bearer-token authentication of the simulated kube-apiserver and the TokenRequest API.

Three kinds of caller, as on a real cluster:

* the admin (the ``--token`` of ``sim serve``, or anyone at all when the sim runs without one): the
  ``kubernetes-admin`` user in ``system:masters``, which no authorizer ever refuses;
* a ServiceAccount, with a token from ``POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`` (the
  TokenRequest subresource ``kubectl create token`` uses): user ``system:serviceaccount:NS:NAME`` in the
  groups ``system:serviceaccounts``, ``system:serviceaccounts:NS`` and ``system:authenticated``. The token
  is a signed JWT with the claims a real one has; it stops working when it expires or when the
  ServiceAccount (or the object it is bound to) is deleted, even if recreated under the same name;
* anyone else with a bearer token when the sim requires one: 401 Unauthorized.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reconciler.sim.apibase import ApiError, Request, Response, ok
from reconciler.sim.store import Store
from reconciler.sim.storebase import Obj

ISSUER = "https://kubernetes.default.svc.cluster.local"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
TOKEN_API_VERSION = "authentication.k8s.io/v1"
# What a token may be bound to, and where those objects live.
BINDABLE = {"Pod": ("", "pods"), "Secret": ("", "secrets"), "Node": ("", "nodes")}


@dataclass(frozen=True)
class UserInfo:
    """An authenticated caller (Kubernetes' user.Info)."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    @property
    def privileged(self) -> bool:
        """Members of system:masters pass every authorization and escalation check."""
        return MASTERS in self.groups

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when the user is a ServiceAccount."""
        if not self.name.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        namespace, _, name = self.name[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
        return (namespace, name) if namespace and name else None


ADMIN = UserInfo("kubernetes-admin", (MASTERS, AUTHENTICATED))


def service_account_user(namespace: str, name: str, uid: str = "", jti: str = "") -> UserInfo:
    extra: dict[str, tuple[str, ...]] = (
        {"authentication.kubernetes.io/credential-id": (f"JTI={jti}",)} if jti else {}
    )
    return UserInfo(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED),
        uid,
        extra,
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _timestamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Authenticator:
    """Turns the Authorization header into a :class:`UserInfo`; issues ServiceAccount tokens."""

    def __init__(self, store: Store, admin_token: str | None) -> None:
        self.store = store
        self.admin_token = admin_token
        self._key = secrets.token_bytes(32)
        self._kid = _b64(hashlib.sha256(self._key).digest()[:12])

    # ---- authentication ------------------------------------------------------------------------------

    def authenticate(self, authorization: str | None) -> UserInfo:
        """The caller, or ApiError 401. Without an admin token every caller but a ServiceAccount is the admin."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            if self.admin_token is None:
                return ADMIN
            raise ApiError(401, "Unauthorized")
        if self.admin_token is not None and hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return ADMIN
        claims = self._verified_claims(token)
        if claims is None:  # not a token this server signed
            if self.admin_token is None:
                return ADMIN
            raise ApiError(401, "Unauthorized")
        user = self._claims_user(claims)
        if user is None:  # ours, but expired or its ServiceAccount is gone
            raise ApiError(401, "Unauthorized")
        return user

    def _verified_claims(self, token: str) -> Obj | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header = json.loads(_unb64(parts[0]))
            signature = _unb64(parts[2])
        except (ValueError, TypeError):
            return None
        if not isinstance(header, dict) or header.get("kid") != self._kid:
            return None
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(signature, expected):
            return None
        try:
            claims = json.loads(_unb64(parts[1]))
        except ValueError:
            return None
        return claims if isinstance(claims, dict) else None

    def _claims_user(self, claims: Obj) -> UserInfo | None:
        now = time.time()
        if claims.get("iss") != ISSUER or not (claims.get("nbf", 0) <= now < claims.get("exp", 0)):
            return None
        info = claims.get("kubernetes.io") or {}
        namespace = str(info.get("namespace") or "")
        sa = info.get("serviceaccount") or {}
        sa_obj = self.store.get_ref("", "serviceaccounts", namespace, str(sa.get("name") or ""))
        if sa_obj is None or sa_obj["metadata"].get("uid") != sa.get("uid"):
            return None
        if sa_obj["metadata"].get("deletionTimestamp"):
            return None
        for kind, bound in info.items():
            if kind in ("pod", "secret", "node") and isinstance(bound, dict):
                group, plural = BINDABLE[kind.capitalize()]
                obj = self.store.get_ref(
                    group, plural, namespace if kind != "node" else "", bound.get("name", "")
                )
                if obj is None or obj["metadata"].get("uid") != bound.get("uid"):
                    return None
        return service_account_user(namespace, str(sa["name"]), str(sa["uid"]), str(claims.get("jti") or ""))

    # ---- TokenRequest --------------------------------------------------------------------------------

    def token_request(self, req: Request, namespace: str, name: str) -> Response:
        """``POST .../serviceaccounts/NAME/token``: a TokenRequest with status.token filled in."""
        if req.method != "POST":
            raise ApiError(405, "the server does not allow this method on the requested resource")
        try:
            body = json.loads(req.body or b"{}")
        except ValueError as exc:
            raise ApiError(400, "couldn't get version/kind; json parse error: invalid JSON") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if (kind and kind != "TokenRequest") or (api_version and api_version != TOKEN_API_VERSION):
            raise ApiError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API version ({TOKEN_API_VERSION})",
            )
        sa = self.store.get_ref("", "serviceaccounts", namespace, name)
        if sa is None:
            raise ApiError(
                404, f'serviceaccounts "{name}" not found', details={"name": name, "kind": "serviceaccounts"}
            )
        spec: Obj = body["spec"] if isinstance(body.get("spec"), dict) else {}
        expiration = spec.get("expirationSeconds")
        expiration = DEFAULT_EXPIRATION if expiration is None else expiration
        audiences = spec.get("audiences") or [ISSUER]
        bound_ref = spec.get("boundObjectRef")
        problem = None
        if not isinstance(expiration, int) or isinstance(expiration, bool):
            problem = f"spec.expirationSeconds: Invalid value: {json.dumps(expiration)}: must be an integer"
        elif expiration < MIN_EXPIRATION:
            problem = f"spec.expirationSeconds: Invalid value: {expiration}: may not specify a duration less than 10 minutes"
        elif expiration > MAX_EXPIRATION:
            problem = f"spec.expirationSeconds: Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"
        if problem is not None:
            raise ApiError(
                422,
                f'TokenRequest.authentication.k8s.io "{name}" is invalid: {problem}',
                details={"name": name, "group": "authentication.k8s.io", "kind": "TokenRequest"},
            )
        issued = int(time.time())
        jti = str(uuid.uuid4())
        info: Obj = {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]},
        }
        if bound_ref:
            info.update(self._bound(namespace, bound_ref))
        claims = {
            "aud": list(audiences),
            "exp": issued + expiration,
            "iat": issued,
            "iss": ISSUER,
            "jti": jti,
            "kubernetes.io": info,
            "nbf": issued,
            "sub": f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        }
        header = _b64(json.dumps({"alg": "HS256", "kid": self._kid}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return ok(
            {
                "kind": "TokenRequest",
                "apiVersion": TOKEN_API_VERSION,
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
                "spec": {
                    "audiences": list(audiences),
                    "expirationSeconds": expiration,
                    "boundObjectRef": bound_ref,
                },
                "status": {
                    "token": f"{header}.{payload}.{_b64(signature)}",
                    "expirationTimestamp": _timestamp(issued + expiration),
                },
            },
            status=201,
        )

    def _bound(self, namespace: str, ref: Obj) -> Obj:
        kind = str(ref.get("kind") or "")
        if kind not in BINDABLE:
            raise ApiError(
                400, f"cannot bind token for object of type {kind or '(empty)'}", reason="BadRequest"
            )
        group, plural = BINDABLE[kind]
        obj_name = str(ref.get("name") or "")
        obj = self.store.get_ref(group, plural, namespace if kind != "Node" else "", obj_name)
        if obj is None:
            raise ApiError(
                404, f'{plural} "{obj_name}" not found', details={"name": obj_name, "kind": plural}
            )
        if ref.get("uid") and ref["uid"] != obj["metadata"]["uid"]:
            raise ApiError(
                409,
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                "The object might have been deleted and then recreated",
                reason="Conflict",
            )
        return {kind.lower(): {"name": obj_name, "uid": obj["metadata"]["uid"]}}


__all__ = ["ADMIN", "Authenticator", "UserInfo", "service_account_user"]


SELF_SUBJECT_REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def self_subject_review(req: Request, user: UserInfo) -> Response:
    """``POST /apis/authentication.k8s.io/v1/selfsubjectreviews`` (GA in 1.28): the caller as the
    authenticators saw it; RBAC lets every authenticated user ask (system:basic-user)."""
    if req.method != "POST":
        raise ApiError(405, "the server does not allow this method on the requested resource")
    info: Obj = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    review = {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": info},
    }
    return ok(review, 201)
