"""Logging of the long-running commands: every line of the process in one format, `plain` or `json`.

The handler sits on the root logger, so whatever logs (our `dra_gitops.*` loggers, modules that log under
their own `reconciler.*` name, libraries such as urllib3, Python's warnings, a thread that crashed) comes
out formatted the same way; a log pipeline reading `--log-format json` never meets a plain line.
"""

from __future__ import annotations

import json
import logging
import sys
import threading

# Our loggers: the level the flags choose. Libraries log their warnings only.
OUR_LOGGERS = ("dra_gitops", "reconciler")


def configure_logging(verbose: int, quiet: bool, log_format: str) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose > 1 else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    for name in OUR_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.setLevel(level)
        logger.propagate = True
    logging.captureWarnings(True)  # warnings.warn(...) as a log line, not a bare stderr text
    threading.excepthook = _log_thread_crash


def _log_thread_crash(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value, args.exc_traceback)
    logging.getLogger("dra_gitops").error("thread %s crashed", name, exc_info=exc_info)  # type: ignore[arg-type]


class LineFormatter(logging.Formatter):
    """One line per event, carrying the target and sha; `json` for log pipelines (a traceback goes into
    its `exc` field)."""

    def __init__(self, style: str) -> None:
        super().__init__()
        self.style_name = style

    def format(self, record: logging.LogRecord) -> str:
        fields = {key: getattr(record, key) for key in ("target", "sha") if getattr(record, key, "")}
        message = record.getMessage()
        trace = self.formatException(record.exc_info) if record.exc_info else ""
        if self.style_name == "json":
            return json.dumps(
                {
                    "time": self.formatTime(record),
                    "level": record.levelname.lower(),
                    "logger": record.name,
                    "msg": message,
                    **fields,
                    **({"exc": trace} if trace else {}),
                }
            )
        context = " ".join(f"{k}={v[:12] if k == 'sha' else v}" for k, v in fields.items())
        line = f"{self.formatTime(record)} {record.levelname.lower():7} {context + ' ' if context else ''}{message}"
        return f"{line}\n{trace}" if trace else line
