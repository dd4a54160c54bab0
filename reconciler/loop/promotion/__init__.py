"""Promotion between targets: the decision, approvals, what an upstream verified."""
