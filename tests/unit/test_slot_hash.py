"""The stable hash H of ``assign="hash"``: pinned vectors, and the same slot from SQLite and PostgreSQL."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    BigInteger,
    Column,
    MetaData,
    Table,
    Text,
    create_engine,
    event,
    insert,
    literal,
    make_url,
    select,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine

from vardiya.errors import ConfigurationError, InvalidInput
from vardiya.slots import (
    HASH_VERSION,
    canonical_text,
    hash_slot,
    hash_slot_sql,
    mod_slot_sql,
    register_sqlite_functions,
    stable_hash,
)

LONG_ID = "record/" + "0123456789" * 20

# Computed once (and cross-checked with `md5sum` and PostgreSQL's md5()) and written down: if any of
# these ever changes, every hashed record would move to another hour. Do not "fix" them; bump
# HASH_VERSION and plan a migration instead.
VECTORS: list[tuple[int | str, int, int]] = [
    # (id, H(id), H(id) mod 24)
    (0, 935853755618645598, 6),
    (1, 886263699231969848, 8),
    (-1, 485089015540539539, 11),
    (42, 728752383503378226, 18),
    (28742, 685264801525721634, 18),
    ("user-7", 291784648701451351, 7),
    ("ç", 726507353573615667, 3),
    (LONG_ID, 669072162851239158, 6),
]

int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
text_ids = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)


def test_hash_version_is_one() -> None:
    assert HASH_VERSION == 1


@pytest.mark.parametrize(("record_id", "expected", "slot"), VECTORS)
def test_pinned_vectors(record_id: int | str, expected: int, slot: int) -> None:
    assert stable_hash(record_id) == expected
    assert hash_slot(record_id, 24) == slot


def test_an_int_hashes_as_its_decimal_text() -> None:
    assert stable_hash(42) == stable_hash("42")
    assert canonical_text(-5) == "-5"
    assert stable_hash("042") != stable_hash(42)


@pytest.mark.parametrize("bad", [True, False, 4.0, b"42", None])
def test_ids_other_than_int_and_str_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidInput, match="int or str"):
        stable_hash(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -3, True, 2.0])
def test_slot_count_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(InvalidInput, match="slots"):
        hash_slot(1, bad)  # type: ignore[arg-type]


@given(st.one_of(int64, text_ids))
def test_hash_fits_in_60_bits(record_id: int | str) -> None:
    assert 0 <= stable_hash(record_id) < 2**60


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    engine = create_engine("sqlite://")
    event.listen(engine, "connect", lambda connection, _record: register_sqlite_functions(connection))
    yield engine
    engine.dispose()


ids_table = Table("ids", MetaData(), Column("number", BigInteger), Column("name", Text))


@settings(max_examples=25, deadline=None)
@given(numbers=st.lists(int64, min_size=1, max_size=30), slots=st.sampled_from([1, 7, 24, 48]))
def test_sqlite_computes_the_same_slots_as_python(
    engine: Engine, numbers: list[int], slots: int
) -> None:
    names = [f"user-{number}" for number in numbers]
    with engine.connect() as connection:
        ids_table.create(connection, checkfirst=True)
        connection.execute(ids_table.delete())
        connection.execute(insert(ids_table), [{"number": n, "name": s} for n, s in zip(numbers, names, strict=True)])
        rows = connection.execute(
            select(
                ids_table.c.number,
                ids_table.c.name,
                hash_slot_sql(ids_table.c.number, slots, "sqlite"),
                hash_slot_sql(ids_table.c.name, slots, "sqlite"),
                mod_slot_sql(ids_table.c.number, slots),
            )
        ).all()
    for number, name, number_hash, name_hash, number_mod in rows:
        assert number_hash == hash_slot(number, slots)
        assert name_hash == hash_slot(name, slots)
        assert number_mod == number % slots  # floor modulo, also for negative ids


def test_sqlite_function_is_usable_in_a_generated_column() -> None:
    # SQLite only allows deterministic functions in generated columns: this fails without it.
    connection = sqlite3.connect(":memory:")
    register_sqlite_functions(connection)
    connection.execute(
        "CREATE TABLE t (id INTEGER, slot INTEGER GENERATED ALWAYS AS "
        "(vardiya_slot_hash(CAST(id AS TEXT), 24)) STORED)"
    )
    connection.executemany("INSERT INTO t (id) VALUES (?)", [(record_id,) for record_id in range(-50, 50)])
    assert dict(connection.execute("SELECT id, slot FROM t")) == {i: hash_slot(i, 24) for i in range(-50, 50)}
    assert connection.execute("SELECT vardiya_slot_hash(NULL, 24)").fetchone() == (None,)
    connection.close()


def test_sql_renders_b_inline_for_ddl_and_expression_indexes() -> None:
    column = ids_table.c.number
    pg = str(hash_slot_sql(column, 24, "postgresql").compile(dialect=postgresql.dialect()))
    assert pg == (
        "CAST(CAST('x' || substr(md5(CAST(ids.number AS TEXT)), 1, 15) AS BIT(60)) AS BIGINT) %% 24"
    )
    lite = str(hash_slot_sql(column, 48, "sqlite").compile(dialect=sqlite.dialect()))
    assert lite == "vardiya_slot_hash(CAST(ids.number AS TEXT), 48)"
    assert str(mod_slot_sql(column, 24).compile(dialect=sqlite.dialect())) == "(ids.number % 24 + 24) % 24"


def test_sql_rejects_unknown_dialects_and_bad_b() -> None:
    with pytest.raises(ConfigurationError, match="postgresql and sqlite"):
        hash_slot_sql(ids_table.c.number, 24, "oracle")
    with pytest.raises(InvalidInput, match="positive"):
        mod_slot_sql(ids_table.c.number, 0)
    with pytest.raises(InvalidInput, match="integer"):
        hash_slot_sql(ids_table.c.number, "24; DROP TABLE ids", "sqlite")  # type: ignore[arg-type]


@pytest.mark.postgres  # tests/conftest.py skips it unless VARDIYA_TEST_POSTGRES names a server
def test_postgresql_computes_the_same_slots_as_python() -> None:
    records = [record_id for record_id, _, _ in VECTORS] + [2**63 - 1, -(2**63), 10**12 + 7]
    numbers = [r for r in records if isinstance(r, int)]
    texts = [str(r) for r in records]
    url = make_url(os.environ["VARDIYA_TEST_POSTGRES"]).set(drivername="postgresql+psycopg")
    engine = create_engine(url, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as connection:
            for values, kind in ((numbers, BigInteger()), (texts, Text())):
                rows = union_all(*(select(literal(value, kind).label("v")) for value in values)).subquery()
                for slots in (24, 48, 7):
                    query = select(rows.c.v, hash_slot_sql(rows.c.v, slots, "postgresql"))
                    results = connection.execute(query).all()
                    assert len(results) == len(values)
                    for value, slot in results:
                        assert slot == hash_slot(value, slots)
            mod_rows = union_all(*(select(literal(v, BigInteger()).label("v")) for v in numbers)).subquery()
            results = connection.execute(select(mod_rows.c.v, mod_slot_sql(mod_rows.c.v, 24))).all()
            assert sorted(value for value, _ in results) == sorted(numbers)
            for value, slot in results:
                assert slot == value % 24  # floor modulo, as in Python
    finally:
        engine.dispose()
