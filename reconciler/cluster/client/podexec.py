"""Running a command in a pod's container: the exec API's websocket stream and the Status it ends with.

Verification's `dra-gitops.io/verify-exec` runs through here (`ClusterClient.exec`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from reconciler.cluster.client.errors import ApiError

_EXEC_STATUS_CHANNEL = 3  # the exec protocols' error channel: a Status when the command has ended


def exec_outcome(status_text: str) -> tuple[int, str | None]:
    """(exit code, why it could not run) from the Status an exec stream ends with.

    Success is 0; a command that ran and failed has its code in details.causes (reason ExitCode); a
    Status without one (a missing executable, a container that stopped) could not run at all.
    """
    try:
        status = json.loads(status_text) if status_text.strip() else {}
    except ValueError:
        return 0, f"unreadable exec status: {status_text[:200]}"
    if not isinstance(status, dict) or status.get("status") == "Success" or not status:
        return 0, None
    for cause in (status.get("details") or {}).get("causes") or []:
        if (
            isinstance(cause, dict)
            and cause.get("reason") == "ExitCode"
            and str(cause.get("message", "")).isdigit()
        ):
            return int(cause["message"]), None
    return 0, str(status.get("message") or "the command could not be started")


def exec_in_pod(
    api: Any,
    namespace: str,
    name: str,
    command: Sequence[str],
    container: str | None = None,
    timeout: float = 60.0,
) -> str:
    """Run a command in a container through the exec API (websocket) of the official `ApiClient`; its output,
    or ApiError when it cannot run, does not finish in time or exits non-zero."""
    from kubernetes import client as k8s_client
    from kubernetes.stream import stream

    core = k8s_client.CoreV1Api(api)
    kwargs: dict[str, Any] = {
        "command": list(command),
        "stderr": True,
        "stdout": True,
        "stdin": False,
        "tty": False,
    }
    if container:
        kwargs["container"] = container
    shown = " ".join(command)

    def failed(why: str, reason: str = "ExecFailed") -> ApiError:
        return ApiError(
            f"exec {shown!r} {why}", where=f"Pod/{namespace}/{name}", status=0, reason=reason, body={}
        )

    try:
        # Unbuffered, so the error channel can tell us the command's exit status afterwards.
        session = stream(
            core.connect_get_namespaced_pod_exec, name, namespace, _preload_content=False, **kwargs
        )
        session.run_forever(timeout=timeout)
        output = str(session.read_stdout() or "") + str(session.read_stderr() or "")
        still_running = session.is_open()
        status = "" if still_running else str(session.read_channel(_EXEC_STATUS_CHANNEL) or "")
        session.close()
    except Exception as exc:  # noqa: BLE001 - websocket and API errors alike end the verification step
        raise failed(f"failed: {exc}") from exc
    if still_running:
        raise failed(f"did not finish within {timeout:g}s", "ExecTimeout")
    code, failure = exec_outcome(status)
    if failure is not None:
        raise failed(f"could not run: {failure}")
    if code:
        raise failed(f"exited with status {code}: {output.strip()[-500:]}")
    return output
