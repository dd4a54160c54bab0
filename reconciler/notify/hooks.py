"""Notification bodies (pure): the generic webhook's signed JSON and Slack's incoming-webhook message.

The generic webhook's body is `{id, target, event, sha, outcome, message, description, time}`, signed as
GitHub signs its own: `X-Dra-Gitops-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>`. A
receiver checks the signature over the raw body and refuses an `id` it has seen (a replay); a retry
sends the same bytes, so the same `id`.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from reconciler.notify.events import Event, Report, describe
from reconciler.notify.request import HttpRequest

SIGNATURE_HEADER = "X-Dra-Gitops-Signature"
EVENT_HEADER = "X-Dra-Gitops-Event"
DELIVERY_HEADER = "X-Dra-Gitops-Delivery"
SLACK_TEXT_LIMIT = 2900  # a section block's text takes 3000 characters; the line's head needs a few

_EMOJI = {
    Event.STARTED: ":arrows_counterclockwise:",
    Event.APPLIED: ":white_check_mark:",
    Event.DENIED: ":no_entry:",
    Event.FAILED: ":x:",
    Event.ROLLED_BACK: ":rewind:",
    Event.ROLLBACK_FAILED: ":rotating_light:",
    Event.AWAITING_APPROVAL: ":hourglass_flowing_sand:",
    Event.DRIFT_CORRECTED: ":wrench:",
}


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def webhook_request(url: str, secret: bytes | None, report: Report, delivery_id: str) -> HttpRequest:
    payload = {
        "id": delivery_id,
        "target": report.target,
        "event": str(report.event),
        "sha": report.sha,
        "outcome": report.outcome,
        "message": report.message,
        "description": describe(report),
        "time": report.at,
    }
    body = json.dumps(payload, sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        EVENT_HEADER: str(report.event),
        DELIVERY_HEADER: delivery_id,
    }
    if secret is not None:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    label = f"webhook {report.event} for {report.sha[:12]}"
    return HttpRequest(label=label, url=url, body=body, headers=headers)


def slack_request(url: str, report: Report) -> HttpRequest:
    """A Slack incoming-webhook message: `text` (notifications and clients without blocks) and blocks."""
    emoji = _EMOJI[report.event]
    text = f"{emoji} *{report.target}* `{report.sha[:12]}`: {describe(report, limit=SLACK_TEXT_LIMIT)}"
    payload = {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"target *{report.target}* · event *{report.event}* · "
                        f"outcome *{report.outcome}* · commit `{report.sha}` · {report.at}",
                    }
                ],
            },
        ],
    }
    label = f"slack {report.event} for {report.sha[:12]}"
    return HttpRequest(
        label=label, url=url, body=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
