"""How outcomes look (pure): each outcome's tone and symbol, for the badges of `templates/macros.html`.

The page shell every page shares is `templates/base.html`. No inline script or style (the
Content-Security-Policy forbids them): the stylesheet and the script are files of the package (`static/`).
Without JavaScript every page reads the same; with it, the page polls `/api/version` and refreshes its
main part when the state changes.
"""

from __future__ import annotations

# Outcome -> (tone, symbol): the tone colours the badge, the symbol and the word carry the meaning.
TONES = {
    "applied": ("good", "✓"),
    "unchanged": ("good", "✓"),
    "drift-corrected": ("good", "✓"),
    "resumed": ("good", "▶"),
    "denied": ("bad", "✖"),
    "dry-run-failed": ("bad", "✗"),
    "apply-failed": ("bad", "✗"),
    "verify-failed": ("bad", "✗"),
    "rolled-back": ("warn", "↶"),
    "rollback-failed": ("bad", "‼"),
    "aborted": ("warn", "↶"),
    "held": ("warn", "‖"),
    "suspended": ("warn", "‖"),
    "drifted": ("warn", "≠"),
    "interrupted": ("warn", "…"),
    "unverified": ("bad", "✗"),
    "source-error": ("bad", "✗"),
    "invalid": ("bad", "✗"),
}
