"""Outcomes reported back: commit statuses on the forge (GitHub, GitLab, Gitea/Forgejo) and notifications
(a signed generic webhook, Slack), as Flux's notification-controller does.

`config.py` reads a target's `commitStatus` and `notifications` keys (pure, every error at `path:line`);
`events.py` names what a pass did; `forge.py` and `hooks.py` build the HTTP requests (pure); `sender.py`
delivers them on one background thread, retried with backoff and bounded; `notifier.py` ties the four
together for the controller. None of it can block or fail a pass, and no token or webhook URL leaves the
request that carries it (not in logs, state or metrics).
"""
