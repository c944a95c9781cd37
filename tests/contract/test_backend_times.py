"""One conversion of times per backend: aware datetimes round-trip exactly, naive ones are refused.

On each backend a time goes in through the column types (SQLAlchemy Core) or through the backend's
driver conversion (``store.backend.times_of``, what the driver-SQL statements use), and comes out
through either; all four ways give back the same instant, in UTC, to the microsecond.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from vardiya.errors import InvalidInput
from vardiya.store import Store
from vardiya.store.backend import times_of
from vardiya.store.types import UTCDateTime, UTCMicros

MOMENTS = [
    datetime(2026, 12, 1, tzinfo=UTC),
    datetime(2026, 12, 1, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(2026, 3, 29, 3, 30, 0, 123_456, tzinfo=ZoneInfo("Europe/Istanbul")),
    datetime(2026, 10, 25, 1, 30, fold=1, tzinfo=ZoneInfo("Europe/Berlin")),  # the repeated hour, second time
    datetime(1969, 7, 20, 20, 17, 40, 1, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
    datetime(2262, 4, 11, 23, 47, 16, 854_775, tzinfo=UTC),
]

_scratch = sa.MetaData()
times = sa.Table(
    "test_backend_times",
    _scratch,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("item_at", UTCMicros, nullable=False),
)


@pytest.fixture
def table(store: Store) -> Iterator[sa.Table]:
    _scratch.create_all(store.engine)
    try:
        yield times
    finally:
        _scratch.drop_all(store.engine)


def _marks(store: Store, count: int) -> str:
    return ", ".join(["?" if store.backend.value == "sqlite" else "%s"] * count)


@pytest.mark.parametrize("moment", MOMENTS, ids=lambda moment: moment.isoformat())
def test_an_aware_time_round_trips_exactly_through_types_and_driver(
    store: Store, table: sa.Table, moment: datetime
) -> None:
    convert = times_of(store.backend)
    with store.transaction() as connection:
        connection.execute(sa.insert(table).values(id=1, at=moment, item_at=moment))
        connection.exec_driver_sql(
            f"INSERT INTO test_backend_times (id, at, item_at) VALUES ({_marks(store, 3)})",
            (2, convert.time(moment), convert.item_time(moment)),
        )
    with store.reading() as connection:
        typed = connection.execute(sa.select(table.c.at, table.c.item_at).order_by(table.c.id)).all()
        raw = connection.exec_driver_sql("SELECT at, item_at FROM test_backend_times ORDER BY id").all()
    for at, item_at in typed:
        assert at == moment and item_at == moment
        assert at.utcoffset() == timedelta(0) and item_at.utcoffset() == timedelta(0)
        utc = moment.astimezone(UTC)
        assert (at.replace(tzinfo=None), at.microsecond) == (utc.replace(tzinfo=None), moment.microsecond)
    for at, item_at in raw:
        assert convert.read_time(at) == moment and convert.read_time(item_at) == moment
    # The driver conversion writes what the column types write, so both rows compare and sort alike.
    assert raw[0] == raw[1]


def test_times_sort_in_the_database_as_they_do_in_python(store: Store, table: sa.Table) -> None:
    with store.transaction() as connection:
        connection.execute(sa.insert(table), [{"id": n, "at": m, "item_at": m} for n, m in enumerate(MOMENTS)])
    with store.reading() as connection:
        by_at = connection.execute(sa.select(table.c.at).order_by(table.c.at)).scalars().all()
        by_item_at = connection.execute(sa.select(table.c.item_at).order_by(table.c.item_at)).scalars().all()
    assert by_at == by_item_at == sorted(MOMENTS)


def test_a_naive_time_is_refused_by_both_ways_and_nothing_is_written(store: Store, table: sa.Table) -> None:
    naive = datetime(2026, 12, 1, 12, 0)
    convert = times_of(store.backend)
    for conversion in (convert.time, convert.item_time):
        with pytest.raises(InvalidInput, match="has no time zone"):
            conversion(naive)
    for values in ({"at": naive, "item_at": MOMENTS[0]}, {"at": MOMENTS[0], "item_at": naive}):
        with pytest.raises(sa.exc.StatementError, match="naive datetime"), store.engine.begin() as connection:
            connection.execute(sa.insert(table).values(id=1, **values))
    with store.reading() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0
    assert convert.time(None) is None and convert.item_time(None) is None and convert.read_time(None) is None
