"""The pass harness's fixtures (`cluster`, `client`, `remote`) for the controller tests here."""

from pass_support import client, cluster, remote

__all__ = ["client", "cluster", "remote"]
