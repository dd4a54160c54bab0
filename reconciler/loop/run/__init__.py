"""Leases and workers: the long-running controller, one worker per target, the targets' clusters."""
