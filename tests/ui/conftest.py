"""The session's dashboard worlds for every test here: one cluster after a demo-like history
(`ui_support.world`), and staging and production in clusters of their own (`envs_support.envs`)."""

from envs_support import envs
from ui_support import world

__all__ = ["envs", "world"]
