"""Source health: what the state records of the target's Git remote, and when that is news.

A pass fetches every time; the state is written only when the health changes (it went bad, its error
changed, it recovered), so a steady pass still writes nothing. Pure.
"""

from __future__ import annotations

from reconciler.loop.store.records import SourceHealth


def observe_fetch(
    health: SourceHealth | None, error: str | None, now: str
) -> tuple[SourceHealth | None, str | None]:
    """The health after a fetch that failed with `error` (None: it worked), and the Event reason to
    raise: `SourceFailed` when the source turns bad, `SourceRecovered` when it is good again. The health is
    None when nothing changed (no write)."""
    if error is None:
        if health is None or health.ok:
            return None, None  # good, as it was (or never recorded: nothing worth a write)
        return SourceHealth(last_fetch=now, ok=True, error=None, since=now), "SourceRecovered"
    if health is not None and not health.ok and health.error == error:
        return None, None  # failing the same way: said already
    since = health.since if health is not None and not health.ok else now
    reason = None if health is not None and not health.ok else "SourceFailed"
    return SourceHealth(last_fetch=now, ok=False, error=error, since=since), reason
