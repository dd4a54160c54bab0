"""`pods/NAME/exec` on the simulated cluster: a container's view of itself, over the exec WebSocket.

A simulated container runs nothing, so exec answers what a verification asks a real one: its
environment, with the devices its claims were allocated injected the way a DRA driver's CDI spec does
(`GPU_DEVICE_0=gpu-1` for driver gpu.example.com, as the example driver sets), and a handful of
commands (`env`, `printenv`, `echo`, `true`, `false`, `sh -c`). Anything else fails as a missing
executable does on a real node. The stream follows the `v4.channel.k8s.io` / `v5.channel.k8s.io`
protocols kubectl and the official client speak: stdout on channel 1, stderr on 2, the Status on 3.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from io import BufferedIOBase
from typing import Any

from reconciler.sim.apibase import ApiError, Request, Response
from reconciler.sim.store import Store
from reconciler.sim.storebase import Obj

__all__ = [
    "ExecResult",
    "container_env",
    "handshake_headers",
    "pod_exec",
    "run_command",
    "status_of",
    "stream_result",
]

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# `claims` key of the claim the scheduler made for the pod's extended resources (not a valid claim name)
EXTENDED = "<extended-resources>"


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    code: int | None  # None: the command could not start (a missing executable)
    message: str = ""


def _field(pod: Mapping[str, Any], path: str) -> str:
    value: Any = pod
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def container_env(
    pod: Mapping[str, Any], container: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """The environment the container runs with: its spec's env, then the devices of its claims.

    `claims` maps the pod's claim names (spec.resourceClaims[].name) to their ResourceClaims.
    """
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": _field(pod, "metadata.name")}
    for item in container.get("env") or []:
        if not isinstance(item, Mapping) or not item.get("name"):
            continue
        source = item.get("valueFrom") or {}
        field_ref = source.get("fieldRef") if isinstance(source, Mapping) else None
        if isinstance(field_ref, Mapping):
            env[str(item["name"])] = _field(pod, str(field_ref.get("fieldPath") or ""))
        elif "value" in item:
            env[str(item["name"])] = str(item.get("value") or "")
    counters: dict[str, int] = {}
    refs = [dict(r or {}) for r in (container.get("resources") or {}).get("claims") or []]
    # the devices of its extended resources backed by DRA: the requests the pod status maps to it
    extended = (
        ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}) if EXTENDED in claims else {}
    )
    refs += [
        {"name": EXTENDED, "request": m.get("requestName")}
        for m in extended.get("requestMappings") or []
        if isinstance(m, Mapping) and m.get("containerName") == container.get("name")
    ]
    for ref in refs:
        claim = claims.get(str(ref.get("name")))
        allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            request = ref.get("request")
            if request and str(result.get("request", "")).split("/")[0] != request:
                continue
            prefix = str(result.get("driver", "dra")).split(".")[0].upper().replace("-", "_")
            index = counters.get(prefix, 0)
            counters[prefix] = index + 1
            env[f"{prefix}_DEVICE_{index}"] = str(result.get("device", ""))
    return env


def run_command(command: Sequence[str], env: Mapping[str, str]) -> ExecResult:
    """Run one of the few commands a simulated container has."""
    if not command:
        return ExecResult("", "", None, "you must specify at least one command for the container")
    name, args = command[0].rsplit("/", 1)[-1], list(command[1:])
    if name in ("sh", "bash") and len(args) == 2 and args[0] == "-c":
        try:
            return run_command(shlex.split(args[1]), env)
        except ValueError as exc:
            return ExecResult("", f"{name}: {exc}\n", 2)
    if name == "env" and not args:
        return ExecResult("".join(f"{k}={v}\n" for k, v in env.items()), "", 0)
    if name == "printenv":
        if not args:
            return ExecResult("".join(f"{k}={v}\n" for k, v in env.items()), "", 0)
        found = [env[a] for a in args if a in env]
        return ExecResult("".join(f"{v}\n" for v in found), "", 0 if len(found) == len(args) else 1)
    if name == "echo":
        return ExecResult(" ".join(args) + "\n", "", 0)
    if name in ("true", "false"):
        return ExecResult("", "", 0 if name == "true" else 1)
    return ExecResult(
        "",
        "",
        None,
        "error executing command in container: failed to exec in container: OCI runtime exec failed: exec "
        f'failed: unable to start container process: exec: "{command[0]}": executable file not found in '
        "$PATH: unknown",
    )


def status_of(result: ExecResult, command: Sequence[str]) -> dict[str, Any]:
    """What kube-apiserver sends on the error channel when the command ends."""
    if result.code == 0:
        return {"metadata": {}, "status": "Success"}
    if result.code is None:
        return {
            "metadata": {},
            "status": "Failure",
            "message": f"Internal error occurred: {result.message}",
            "reason": "InternalError",
            "code": 500,
        }
    return {
        "metadata": {},
        "status": "Failure",
        "message": (
            f"command terminated with non-zero exit code: error executing command {list(command)}, "
            f"exit code {result.code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(result.code)}]},
    }


def handshake_headers(headers: Mapping[str, str]) -> list[tuple[str, str]] | None:
    """The 101 answer's headers for a WebSocket upgrade speaking a channel protocol; None otherwise."""
    key = headers.get("sec-websocket-key")
    if "websocket" not in headers.get("upgrade", "").lower() or not key:
        return None
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    protocol = next((p for p in PROTOCOLS if p in offered), None)
    if protocol is None:
        return None
    accept = base64.b64encode(
        hashlib.sha1((key + _WS_GUID).encode(), usedforsecurity=False).digest()
    ).decode()
    return [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", accept),
        ("Sec-WebSocket-Protocol", protocol),
    ]


def _frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, final frame (a server never masks)."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        return head + bytes([n]) + payload
    if n < 1 << 16:
        return head + bytes([126]) + struct.pack("!H", n) + payload
    return head + bytes([127]) + struct.pack("!Q", n) + payload


def stream_result(result: ExecResult, command: Sequence[str]) -> Callable[[BufferedIOBase], None]:
    """Writes the command's output, its Status and a close frame on the upgraded connection."""

    def write(out: BufferedIOBase) -> None:
        binary = 0x2
        if result.stdout:
            out.write(_frame(binary, b"\x01" + result.stdout.encode()))
        if result.stderr:
            out.write(_frame(binary, b"\x02" + result.stderr.encode()))
        status = json.dumps(status_of(result, command)).encode()
        out.write(_frame(binary, b"\x03" + status))
        out.write(_frame(0x8, struct.pack("!H", 1000)))
        out.flush()

    return write


def _claims_of(store: Store, pod: Obj) -> dict[str, Obj]:
    """The pod's ResourceClaims by its claim names (named claims, or those generated for it)."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "")
    generated = {
        str(s.get("name")): str(s.get("resourceClaimName"))
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(s, dict) and s.get("resourceClaimName")
    }
    out: dict[str, Obj] = {}
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = str(pc.get("name"))
        claim_name = pc.get("resourceClaimName") or generated.get(name)
        if not claim_name:
            continue
        claim = store.get_ref("resource.k8s.io", "resourceclaims", ns, str(claim_name))
        if claim is not None:
            out[name] = claim
    extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    claim = store.get_ref("resource.k8s.io", "resourceclaims", ns, str(extended)) if extended else None
    if claim is not None:
        out[EXTENDED] = claim
    return out


def pod_exec(store: Store, req: Request, namespace: str, name: str) -> Response:
    """`pods/NAME/exec` over a WebSocket: 101 and the command's streams, or the error a real server gives."""
    if req.method not in ("GET", "POST"):
        raise ApiError(405, "the server does not allow this method on the requested resource")
    pod = store.get_ref("", "pods", namespace, name)
    if pod is None:
        raise ApiError(404, f'pods "{name}" not found', "NotFound", {"name": name, "kind": "pods"})
    containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    wanted = req.query.get("container") or (str(containers[0].get("name")) if containers else "")
    container = next((c for c in containers if c.get("name") == wanted), None)
    if container is None:
        raise ApiError(400, f"container {wanted} is not valid for pod {name}", "BadRequest")
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise ApiError(
            400, f"cannot exec into a container in a completed pod; current phase is {phase}", "BadRequest"
        )
    running = any(
        s.get("name") == wanted and "running" in (s.get("state") or {})
        for s in (pod.get("status") or {}).get("containerStatuses") or []
        if isinstance(s, dict)
    )
    if phase != "Running" or not running:
        raise ApiError(400, f'unable to upgrade connection: container not found ("{wanted}")', "BadRequest")
    headers = handshake_headers(req.headers)
    if headers is None:
        raise ApiError(400, "Upgrade request required", "BadRequest")
    command = [value for key, value in req.query_pairs if key == "command"]
    result = run_command(command, container_env(pod, container, _claims_of(store, pod)))
    return Response(101, headers=headers, upgrade=stream_result(result, command))
