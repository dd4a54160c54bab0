"""Where a commit stands at a promoted target's gate, from `dra-gitops status -o json` (see README.md).

    python3 promotion-gate.py SHA DOWNSTREAM.json [UPSTREAM.json]

DOWNSTREAM.json is the status of the promoted target (production), UPSTREAM.json optionally that of the
target it promotes from (staging), for a quick answer when the upstream failed the commit. Prints one
line, a verdict and why, and exits 0 (the pipeline acts on the verdict):

    awaiting   the target awaits approval of SHA: `dra-gitops approve` may go
    approved   SHA was approved already: wait for its delivery
    delivered  SHA is the target's last good commit already
    waiting    not yet (soaking upstream, or not taken up yet): look again later
    refused    SHA will not be delivered as it is (not eligible, superseded, failed upstream)
    outcome    (`--outcome`) the target attempted SHA: applied, or how it failed

With --outcome: `applied` or `failed <outcome>` once the target's last attempt is SHA and no pass runs,
else `waiting`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

FAILED = {
    "denied",
    "dry-run-failed",
    "apply-failed",
    "verify-failed",
    "rolled-back",
    "rollback-failed",
    "invalid",
    "unverified",
    "aborted",
}


def short(sha: str | None) -> str:
    return (sha or "(none)")[:12]


def read(path: str) -> dict[str, Any]:
    with open(path) as file:
        data = json.load(file)
    assert isinstance(data, dict), f"{path}: not the JSON of `dra-gitops status`"
    return data


def upstream_failed(sha: str, upstream: dict[str, Any]) -> str | None:
    """Why the upstream did not verify `sha`, when it tried it and it failed (None otherwise)."""
    if any(entry.get("sha") == sha for entry in upstream.get("verified") or []):
        return None
    if (upstream.get("inProgress") or {}).get("sha") == sha:
        return None
    attempt = upstream.get("lastAttempted") or {}
    if attempt.get("sha") == sha and (attempt.get("outcome") in FAILED or attempt.get("rolledBack")):
        return f"the upstream did not verify {short(sha)}: its attempt ended {attempt.get('outcome')}"
    for record in upstream.get("history") or []:
        if record.get("sha") == sha and record.get("outcome") in FAILED:
            return f"the upstream did not verify {short(sha)}: {record.get('outcome')}"
    return None


def gate(sha: str, target: dict[str, Any], upstream: dict[str, Any] | None) -> str:
    if target.get("lastGood") == sha:
        return f"delivered {short(sha)} is the last good commit already"
    approval = target.get("approval") or {}
    if approval.get("sha") == sha:
        if approval.get("approvedBy"):
            return f"approved {short(sha)} was approved by {approval['approvedBy']} at {approval.get('approvedAt')}"
        return f"awaiting {short(sha)} awaits approval since {approval.get('since')}"
    promotion = target.get("promotion")
    if promotion is None:
        return "refused the target does not promote from an upstream (no `promoteFrom`)"
    for entry in promotion.get("notEligible") or []:
        if entry.get("sha") == sha:
            why = str(entry.get("why"))
            return f"{'waiting' if why.startswith('soaking') else 'refused'} {short(sha)}: {why}"
    if upstream is not None:
        failed = upstream_failed(sha, upstream)
        if failed:
            return f"refused {failed}"
    if approval.get("sha"):
        return f"refused {short(approval['sha'])} awaits approval, not {short(sha)} (the newest verified commit wins)"
    if promotion.get("error"):
        return f"waiting {promotion['error']}"
    return f"waiting {promotion.get('upstream')} has not verified {short(sha)} yet (or the target has not looked yet)"


def outcome(sha: str, target: dict[str, Any]) -> str:
    attempt = target.get("lastAttempted") or {}
    if target.get("inProgress"):
        return f"waiting a pass of the target is running ({target['inProgress'].get('operation')})"
    if target.get("lastGood") == sha:
        return f"applied {short(sha)} applied and verified"
    if attempt.get("sha") != sha:
        return f"waiting the target has not finished a pass of {short(sha)} yet"
    rolled = " (rolled back)" if attempt.get("rolledBack") else ""
    return f"failed {short(sha)}: {attempt.get('outcome')}{rolled}"


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--outcome"]
    if len(args) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    sha, target = args[0].lower(), read(args[1])
    if "--outcome" in argv:
        print(outcome(sha, target))
    else:
        print(gate(sha, target, read(args[2]) if len(args) == 3 else None))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
