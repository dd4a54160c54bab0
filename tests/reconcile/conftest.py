"""The pass harness's fixtures (`cluster`, `client`, `remote`) for every test here; a module may define its own."""

from pass_support import client, cluster, remote

__all__ = ["client", "cluster", "remote"]
