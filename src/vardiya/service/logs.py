"""Logs of the services: lines for people, or one JSON object per line for a log pipeline.

``--log-format json`` writes ``{"ts", "level", "logger", "message", ...}`` and every field the code
passed as ``extra`` (job, period, slot, planned_at, lateness_s, pipeline, trigger, ...), so a log
search can ask "ticks of job X later than 5 s" without parsing sentences. Only vardiya's loggers are
configured; a user's logging setup is left alone.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum

from ..errors import InvalidInput

__all__ = ["JsonFormatter", "LogFormat", "configure_logging"]

# The attributes every LogRecord has; the rest came in through ``extra``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, object] = {
            # The record's own creation time, as logging stamps it; engine code reads no clock for it.
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                document[name] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)


def configure_logging(fmt: str = LogFormat.TEXT, level: int = logging.INFO) -> None:
    """Send vardiya's logs to stderr in ``fmt`` (replacing a handler this function installed before)."""
    try:
        chosen = LogFormat(fmt)
    except ValueError:
        raise InvalidInput(f"--log-format {fmt!r} is not known; use text or json") from None
    logger = logging.getLogger("vardiya")
    for handler in list(logger.handlers):
        if getattr(handler, "_vardiya", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._vardiya = True  # type: ignore[attr-defined]
    if chosen is LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
