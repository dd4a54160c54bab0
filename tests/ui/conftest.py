"""The session's dashboard world (`ui_support.world`) for every test here."""

from ui_support import world

__all__ = ["world"]
