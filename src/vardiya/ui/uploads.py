"""The planner's uploads: a workload CSV and a cost profile TOML sent from the browser instead of named
by path. They are read in memory and parsed by the planner's own parsers (the errors of ``vardiya plan``,
naming the uploaded file); nothing is written, neither to the store nor to the disk.

A file over ``UPLOAD_MAX_BYTES`` is refused (413), one of the wrong kind (by its name's suffix) too
(415), and one that is not UTF-8 text or not a workload or profile is refused with the parser's one
line (400).
"""

from __future__ import annotations

import tomllib
from pathlib import PurePath
from typing import BinaryIO

from fastapi import HTTPException

from ..errors import InvalidInput
from ..plan.profile import Profile, parse_profile
from ..plan.workload import Workload, parse_workload

__all__ = ["PROFILE_SUFFIXES", "UPLOAD_BODY_MAX_BYTES", "UPLOAD_MAX_BYTES", "WORKLOAD_SUFFIXES", "profile_upload",
           "workload_upload"]

#: The largest workload or profile the planner accepts as an upload (a night of a million readings is ~20 MB
#: of CSV; the planner replays a sample of it as well).
UPLOAD_MAX_BYTES = 10 * 1024 * 1024
#: The largest upload request (two files and the form's fields); a bigger one is refused before it is read.
UPLOAD_BODY_MAX_BYTES = 2 * UPLOAD_MAX_BYTES + 64 * 1024
WORKLOAD_SUFFIXES = (".csv", ".txt")
PROFILE_SUFFIXES = (".toml",)


def _text(what: str, name: str, stream: BinaryIO, suffixes: tuple[str, ...]) -> str:
    """The upload's text, or an ``HTTPException`` (413, 415) or ``InvalidInput`` (400) naming the file."""
    if PurePath(name).suffix.lower() not in suffixes:
        raise HTTPException(
            415, f"the {what} upload {name!r} is not a {' or '.join(suffixes)} file; upload the {what} "
            f"{'CSV of record,outcome[,duration_ms]' if what == 'workload' else 'TOML cost profile'}",
        )
    data = stream.read(UPLOAD_MAX_BYTES + 1)
    if len(data) > UPLOAD_MAX_BYTES:
        raise HTTPException(413, f"the {what} upload {name!r} is over {UPLOAD_MAX_BYTES // (1024 * 1024)} MB; "
                            "give a smaller sample, or a path under the dashboard's working directory")
    if not data.strip():
        raise InvalidInput(f"the {what} upload {name!r} is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InvalidInput(f"{name}, line {line}: byte {data[error.start]:#04x} is not UTF-8 text; "
                           f"upload the {what} as UTF-8 text") from None


def workload_upload(name: str, stream: BinaryIO) -> Workload:
    """An uploaded workload CSV, parsed as ``vardiya plan --workload`` parses a file."""
    return parse_workload(_text("workload", name, stream, WORKLOAD_SUFFIXES).splitlines(), source=name)


def profile_upload(name: str, stream: BinaryIO) -> Profile:
    """An uploaded cost profile TOML, parsed as ``vardiya plan --profile`` parses a file."""
    text = _text("profile", name, stream, PROFILE_SUFFIXES)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput(f"{name} is not valid TOML: {error}") from None
    return parse_profile(document, source=name)
