"""``output_path`` (one deterministic place per day and record) and ``atomic_write`` on a real directory."""

from __future__ import annotations

import stat
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from vardiya.errors import ConfigurationError
from vardiya.slots.sinks import atomic_write, output_path

ISTANBUL = ZoneInfo("Europe/Istanbul")


@pytest.mark.parametrize(
    "period",
    [
        "2026-12-01",
        date(2026, 12, 1),
        datetime(2026, 12, 1, 5, 1, tzinfo=ISTANBUL),
        datetime(2026, 12, 1, 23, 59, tzinfo=ISTANBUL),
    ],
    ids=["key", "date", "datetime-morning", "datetime-night"],
)
def test_output_path_is_the_day_and_the_record(tmp_path: Path, period: str | date | datetime) -> None:
    assert output_path(tmp_path / "out", period, 42) == tmp_path / "out" / "2026" / "12" / "01" / "42.json"
    assert output_path("out", period, 42) == Path("out/2026/12/01/42.json")


def test_output_path_is_deterministic_and_tells_records_and_days_apart(tmp_path: Path) -> None:
    assert output_path(tmp_path, "2026-12-01", 42) == output_path(tmp_path, "2026-12-01", 42)
    paths = {output_path(tmp_path, day, record) for day in ("2026-12-01", "2026-12-02") for record in (42, 43, "42a")}
    assert len(paths) == 6
    assert output_path(tmp_path, "2026-01-09", 7, suffix=".csv") == tmp_path / "2026" / "01" / "09" / "7.csv"
    assert output_path(tmp_path, "2026-12-01", -7).name == "-7.json"


@pytest.mark.parametrize("record", ["", "a/b", "/etc/passwd", "../42", ".", ".."])
def test_output_path_refuses_ids_that_are_not_file_names(tmp_path: Path, record: str) -> None:
    with pytest.raises(ConfigurationError, match="cannot be a file name"):
        output_path(tmp_path, "2026-12-01", record)


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "fast"])
@pytest.mark.parametrize(
    "data", ['{"user": 42}', b'{"user": 42, "bytes": true}', "é" * 300_000], ids=["str", "bytes", "large"]
)
def test_atomic_write_publishes_the_whole_content(tmp_path: Path, durable: bool, data: str | bytes) -> None:
    target = output_path(tmp_path / "out", "2026-12-01", 42)  # its directories do not exist yet

    assert atomic_write(target, data, durable=durable) is True

    expected = data.encode("utf-8") if isinstance(data, str) else data
    assert target.read_bytes() == expected
    assert list(target.parent.iterdir()) == [target]  # no temp file left next to it


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "fast"])
def test_atomic_write_replaces_an_existing_file_whole(tmp_path: Path, durable: bool) -> None:
    target = tmp_path / "42.json"
    atomic_write(target, "x" * 10_000, durable=durable)
    assert atomic_write(target, "short", durable=durable) is True
    assert target.read_text(encoding="utf-8") == "short"
    assert list(tmp_path.iterdir()) == [target]


def test_skip_existing_returns_false_and_leaves_the_content(tmp_path: Path) -> None:
    target = tmp_path / "42.json"
    assert atomic_write(target, "first", skip_existing=True) is True
    inode = target.stat().st_ino

    assert atomic_write(target, "second", skip_existing=True) is False

    assert target.read_text(encoding="utf-8") == "first"
    assert target.stat().st_ino == inode
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "fast"])
def test_output_files_are_readable_by_others(tmp_path: Path, durable: bool) -> None:
    # mkstemp creates its file 0600 whatever the umask; an output is meant to be read by others.
    new, replaced = tmp_path / "new.json", tmp_path / "replaced.json"
    replaced.write_text("old", encoding="utf-8")
    replaced.chmod(0o600)
    atomic_write(new, "{}", durable=durable)
    atomic_write(replaced, "{}", durable=durable)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    assert stat.S_IMODE(replaced.stat().st_mode) == 0o644


def test_sub_day_periods_get_a_folder_each() -> None:
    from datetime import timedelta

    from vardiya.slots import SlotScheme

    scheme = SlotScheme(slots=10, period=timedelta(minutes=10), tz="Europe/Istanbul")
    first = scheme.period_of(datetime(2026, 12, 1, 5, 3, tzinfo=UTC))
    second = scheme.period_of(datetime(2026, 12, 1, 5, 13, tzinfo=UTC))
    assert output_path("out", first, 3) != output_path("out", second, 3)
    assert output_path("out", first, 3) == Path("out/2026/12/01/0800/3.json")
    assert output_path("out", first.key, 3) == output_path("out", first, 3)


def test_naive_datetime_and_junk_period_are_refused() -> None:
    from vardiya.errors import InvalidInput

    with pytest.raises(InvalidInput, match="no time zone"):
        output_path("out", datetime(2026, 12, 1), 3)
    with pytest.raises(InvalidInput, match="not a period key"):
        output_path("out", "yesterday", 3)
