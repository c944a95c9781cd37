"""``SqlTableSource``: one slot's not-settled ids, selected in the database, on both store backends.

Every combination of where the table lives (the store's own database, so the ledger is joined in SQL,
or a separate SQLite file, so the ledger is read in chunks), assign (mod, hash) and slot column (the
indexed stored column of ``add_slot_index``, or the slot computed in the query) must give exactly the
ids ``scheme.slot_of`` puts in each slot, minus the settled ones.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from vardiya.errors import ConfigurationError, InvalidInput
from vardiya.slots import SlotScheme, register_sqlite_functions
from vardiya.slots.index import add_slot_index
from vardiya.slots.sources import Source
from vardiya.slots.sql_source import SqlTableSource, slot_column_name
from vardiya.store import LedgerEntry, LedgerStatus, Store

IDS = [*range(1, 5001), -1, -7, -23, -24, -25, -4999]
JOB = "sync-users"
PERIOD = "2026-12-01"
GIVE_UP_AFTER = 3
CHUNK = 37  # smaller than every slot (about 208 ids), so each slot takes several pages


def _done(record: int) -> bool:
    return record % 7 == 0


def _given_up(record: int) -> bool:
    return record % 11 == 0 and not _done(record)


def _failed_once(record: int) -> bool:
    return record % 13 == 0 and not _done(record) and not _given_up(record)


def _settled(record: int) -> bool:
    return _done(record) or _given_up(record)


def user_engine(url: str) -> sa.Engine:
    """A plain engine on a test database; SQLite connections get the slot hash, as any writer needs."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", lambda connection, _record: register_sqlite_functions(connection))
    return engine


def create_users(url: str, ids: list[int] | list[str], *, id_type: str = "BIGINT") -> None:
    engine = user_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS users")
            connection.exec_driver_sql(f"CREATE TABLE users (id {id_type} PRIMARY KEY, name TEXT NOT NULL)")
            connection.execute(
                sa.text("INSERT INTO users (id, name) VALUES (:id, :name)"),
                [{"id": record, "name": f"user {record}"} for record in ids],
            )
    finally:
        engine.dispose()


def drop_users(url: str) -> None:
    engine = user_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS users")
    finally:
        engine.dispose()


@pytest.fixture
def other_url(tmp_path: Path) -> str:
    """A SQLite file that is not the store's database."""
    path = tmp_path / "users.db"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}"


MakeSource = Callable[..., SqlTableSource]


@pytest.fixture
def make_source() -> Iterator[MakeSource]:
    """Make ``SqlTableSource`` objects that are closed when the test ends."""
    made: list[SqlTableSource] = []

    def make(*args: Any, **kwargs: Any) -> SqlTableSource:
        made.append(SqlTableSource(*args, **kwargs))
        return made[-1]

    yield make
    for source in made:
        source.close()


@dataclass(frozen=True)
class Setup:
    url: str
    same_database: bool


@pytest.fixture(params=["same-db", "other-db"])
def users(request: pytest.FixtureRequest, store_url: str, other_url: str) -> Iterator[Setup]:
    """A ``users`` table with ``IDS``, in the store's database or in another SQLite file."""
    same = request.param == "same-db"
    url = store_url if same else other_url
    create_users(url, IDS)
    try:
        yield Setup(url=url, same_database=same)
    finally:
        drop_users(url)


def mark_ledger(store: Store) -> None:
    """Done, given up and failed-once marks for this period; done marks elsewhere that must not count."""
    entries = [LedgerEntry(record=r, status=LedgerStatus.DONE) for r in IDS if _done(r)]
    entries += [
        LedgerEntry(record=r, status=LedgerStatus.FAILED, attempts=GIVE_UP_AFTER) for r in IDS if _given_up(r)
    ]
    entries += [LedgerEntry(record=r, status=LedgerStatus.FAILED, attempts=1) for r in IDS if _failed_once(r)]
    store.ledger.mark(JOB, PERIOD, entries)
    elsewhere = [LedgerEntry(record=r, status=LedgerStatus.DONE) for r in IDS if r % 5 == 0]
    store.ledger.mark(JOB, "2026-11-30", elsewhere)
    store.ledger.mark("another-job", PERIOD, elsewhere)


def _everything(_record: int) -> bool:
    return True


def _not_settled(record: int) -> bool:
    return not _settled(record)


def expected(scheme: SlotScheme, slot: int, keep: Callable[[int], bool] = _not_settled) -> list[int]:
    """The ids ``scheme.slot_of`` puts in ``slot`` that ``keep`` keeps, in id order."""
    return sorted(r for r in IDS if scheme.slot_of(r) == slot and keep(r))


def records(
    source: SqlTableSource,
    store: Store,
    scheme: SlotScheme,
    slot: int,
    *,
    give_up_after: int | None = GIVE_UP_AFTER,
    limit: int | None = None,
) -> list[object]:
    stream = source.records(
        store=store, job=JOB, scheme=scheme, period=PERIOD, slot=slot, give_up_after=give_up_after, limit=limit
    )
    return list(stream)


# -- the matrix -------------------------------------------------------------------------------------


@pytest.mark.parametrize("indexed", [True, False], ids=["slot-index", "computed"])
@pytest.mark.parametrize("assign", ["mod", "hash"])
def test_every_slot_gives_exactly_its_not_settled_ids(
    store: Store, users: Setup, assign: str, indexed: bool, make_source: MakeSource
) -> None:
    scheme = SlotScheme(slots=24, assign=assign)
    if indexed:
        assert add_slot_index(users.url, "users", scheme=scheme).uses_index
    mark_ledger(store)
    source = make_source(users.url, "users", chunk_size=CHUNK)

    assert isinstance(source, Source)
    assert source.shares_database_with(store) is users.same_database
    assert source.stored_slot_column(scheme) == (slot_column_name(scheme) if indexed else None)
    seen: list[object] = []
    for slot in range(24):
        got = records(source, store, scheme, slot)
        assert got == expected(scheme, slot), slot
        assert len(got) > CHUNK
        seen += got
    assert sorted(seen) == sorted(r for r in IDS if not _settled(r))
    assert any(_failed_once(r) for r in seen)  # failed with attempts left: still selected


@pytest.mark.parametrize("assign", ["mod", "hash"])
def test_without_give_up_only_done_is_settled(
    store: Store, users: Setup, assign: str, make_source: MakeSource
) -> None:
    scheme = SlotScheme(slots=24, assign=assign)
    mark_ledger(store)
    source = make_source(users.url, "users", chunk_size=CHUNK)

    got = records(source, store, scheme, 5, give_up_after=None)

    assert got == expected(scheme, 5, lambda record: not _done(record))
    assert any(isinstance(r, int) and _given_up(r) for r in got)


@pytest.mark.parametrize("indexed", [True, False], ids=["slot-index", "computed"])
def test_limit_is_honoured(store: Store, users: Setup, indexed: bool, make_source: MakeSource) -> None:
    scheme = SlotScheme(slots=24, assign="hash")
    if indexed:
        add_slot_index(users.url, "users", scheme=scheme)
    mark_ledger(store)
    source = make_source(users.url, "users", chunk_size=CHUNK)
    full = expected(scheme, 9)

    assert records(source, store, scheme, 9, limit=0) == []
    assert records(source, store, scheme, 9, limit=10) == full[:10]
    assert records(source, store, scheme, 9, limit=CHUNK + 5) == full[: CHUNK + 5]
    assert records(source, store, scheme, 9, limit=len(full) + 100) == full


def test_pages_are_read_lazily_one_short_query_each(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    scheme = SlotScheme(slots=24)
    source = make_source(users.url, "users", chunk_size=CHUNK)
    engine = store.engine if users.same_database else source.engine
    pages: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "FROM users" in statement:
            pages.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        stream = source.records(
            store=store, job=JOB, scheme=scheme, period=PERIOD, slot=3, give_up_after=None, limit=None
        )
        assert pages == []
        first = [next(stream) for _ in range(CHUNK)]
        assert len(pages) == 1
        rest = list(stream)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)

    everything = first + rest
    assert everything == expected(scheme, 3, _everything)
    assert len(pages) == len(everything) // CHUNK + 1
    assert all("LIMIT" in page for page in pages)


def test_the_ledger_is_read_afresh_for_every_page(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    scheme = SlotScheme(slots=24)
    source = make_source(users.url, "users", chunk_size=CHUNK)
    slot_ids = expected(scheme, 4, _everything)
    # A slot with settled records is filtered page by page (a slot with none is one plain select).
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=slot_ids[0], status=LedgerStatus.DONE, slot=4)])
    slot_ids = slot_ids[1:]

    stream = source.records(
        store=store, job=JOB, scheme=scheme, period=PERIOD, slot=4, give_up_after=None, limit=None
    )
    first = next(stream)
    later = slot_ids[CHUNK:]  # not yet read from the database
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=r, status=LedgerStatus.DONE) for r in later])

    if source.shares_database_with(store):
        # The anti-join runs per page: what was settled meanwhile is not handed out.
        assert [first, *stream] == slot_ids[:CHUNK]
    else:
        # Another database: the slot's settled keys are read once, when the selection starts.
        assert [first, *stream] == slot_ids


def test_count_and_all_ids_ignore_the_ledger(store: Store, users: Setup, make_source: MakeSource) -> None:
    scheme = SlotScheme(slots=24, assign="hash")
    mark_ledger(store)
    source = make_source(users.url, "users", chunk_size=CHUNK)

    assert [source.count(scheme, slot) for slot in range(24)] == [
        len(expected(scheme, slot, _everything)) for slot in range(24)
    ]
    assert list(source.all_ids()) == sorted(IDS)


def test_hash_over_text_ids(store: Store, users: Setup, make_source: MakeSource) -> None:
    names = [f"acct-{n}" for n in range(600)]
    create_users(users.url, names, id_type="VARCHAR(40)")
    scheme = SlotScheme(slots=24, assign="hash")
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=r, status=LedgerStatus.DONE) for r in names[::3]])
    done = set(names[::3])

    for indexed in (False, True):
        if indexed:
            add_slot_index(users.url, "users", scheme=scheme)
        source = make_source(users.url, "users", chunk_size=CHUNK)
        for slot in range(24):
            assert records(source, store, scheme, slot) == sorted(
                r for r in names if scheme.slot_of(r) == slot and r not in done
            )


def test_a_slot_column_of_another_scheme_is_refused(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    column = add_slot_index(users.url, "users", scheme=SlotScheme(slots=24)).column
    source = make_source(users.url, "users", slot_column=column, chunk_size=CHUNK)

    assert records(source, store, SlotScheme(slots=24), 2) == expected(SlotScheme(slots=24), 2, _everything)
    with pytest.raises(ConfigurationError, match="does not hold the slots"):
        records(source, store, SlotScheme(slots=48), 2)


def test_a_stored_column_of_another_b_is_not_picked_up(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    add_slot_index(users.url, "users", scheme=SlotScheme(slots=24))
    source = make_source(users.url, "users", chunk_size=CHUNK)
    scheme = SlotScheme(slots=48)

    assert source.stored_slot_column(scheme) is None
    assert records(source, store, scheme, 40) == expected(scheme, 40, _everything)


# -- bad input --------------------------------------------------------------------------------------


def _error(source: SqlTableSource, store: Store, scheme: SlotScheme | None = None) -> str:
    with pytest.raises(ConfigurationError) as caught:
        records(source, store, scheme or SlotScheme(slots=24), 0)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unknown_table_names_it_and_lists_the_tables(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    message = _error(make_source(users.url, "customers"), store)

    assert "'customers'" in message and "users" in message


def test_unknown_columns_name_them_and_list_the_columns(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    id_message = _error(make_source(users.url, "users", id_column="user_id"), store)
    slot_message = _error(make_source(users.url, "users", slot_column="slot"), store)

    assert "'user_id'" in id_message and "id, name" in id_message
    assert "'slot'" in slot_message and "id, name" in slot_message


def test_mod_over_text_ids_suggests_hash(store: Store, users: Setup, make_source: MakeSource) -> None:
    message = _error(make_source(users.url, "users", id_column="name"), store)

    assert "assign='hash'" in message


def test_missing_sqlite_file_is_a_configuration_error(
    store: Store, tmp_path: Path, make_source: MakeSource
) -> None:
    message = _error(make_source(f"sqlite:///{tmp_path / 'absent.db'}", "users"), store)

    assert "absent.db" in message
    assert not (tmp_path / "absent.db").exists()


def test_bad_arguments_are_refused_at_once(store: Store, other_url: str, make_source: MakeSource) -> None:
    with pytest.raises(InvalidInput, match="chunk_size"):
        SqlTableSource(other_url, "users", chunk_size=0)
    create_users(other_url, [1, 2, 3])
    source = make_source(other_url, "users")
    with pytest.raises(InvalidInput, match="out of range"):
        records(source, store, SlotScheme(slots=24), 24)
    with pytest.raises(InvalidInput, match="limit"):
        records(source, store, SlotScheme(slots=24), 1, limit=-1)


def test_same_database_is_recognised_through_url_spellings(
    store: Store, store_url: str, backend: str, monkeypatch: pytest.MonkeyPatch, make_source: MakeSource
) -> None:
    if backend == "sqlite":
        path = Path(sa.make_url(store_url).database or "")
        monkeypatch.chdir(path.parent)
        spelling = f"sqlite:///{path.name}"
    else:
        url = sa.make_url(store_url)
        spelling = url.set(drivername="postgresql+psycopg", port=None).render_as_string(hide_password=False)
        if url.port not in (None, 5432):
            spelling = url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)

    assert make_source(spelling, "users").shares_database_with(store)
    assert not make_source(f"sqlite:///{Path.cwd() / 'elsewhere.db'}", "users").shares_database_with(store)


def test_a_row_that_replaced_a_settled_one_is_selected_although_the_counts_match(
    store: Store, users: Setup, make_source: MakeSource
) -> None:
    """A slot with as many settled rows as ids is not settled when one of those rows is a deleted id's."""
    scheme = SlotScheme(slots=24)
    slot_ids = [r for r in IDS if scheme.slot_of(r) == 5]
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=r, status=LedgerStatus.DONE, slot=5) for r in slot_ids])
    source = make_source(users.url, "users", chunk_size=CHUNK)

    def selected() -> list[int]:
        return list(source.records(
            store=store, job=JOB, scheme=scheme, period=PERIOD, slot=5, give_up_after=None, limit=None
        ))

    assert selected() == []
    newcomer = next(r for r in range(10_000, 20_000) if scheme.slot_of(r) == 5)
    engine = user_engine(users.url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("DELETE FROM users WHERE id = :id"), {"id": slot_ids[0]})
            connection.execute(sa.text("INSERT INTO users (id, name) VALUES (:id, 'new')"), {"id": newcomer})
    finally:
        engine.dispose()
    assert selected() == [newcomer]  # the same source object, which counted the slot before
    assert list(make_source(users.url, "users", chunk_size=CHUNK).records(
        store=store, job=JOB, scheme=scheme, period=PERIOD, slot=5, give_up_after=None, limit=None
    )) == [newcomer]


def test_a_settled_slot_is_known_by_its_fingerprint_without_selecting_its_ids(
    store: Store, users: Setup, make_source: MakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheme = SlotScheme(slots=24)
    slot_ids = [r for r in IDS if scheme.slot_of(r) == 7]
    source = make_source(users.url, "users", chunk_size=CHUNK)
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=r, status=LedgerStatus.DONE, slot=7) for r in slot_ids[1:]])
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=99_999_999, status=LedgerStatus.DONE, slot=7)])  # not an id
    # as many settled rows as ids, one of them a stranger's: the fingerprints differ, the ids are selected
    assert store.ledger.count_settled(JOB, PERIOD, 7) == len(slot_ids)
    predicate = source._slot_predicate(scheme, 7)
    assert source._fingerprint(predicate) != store.ledger.settled_fingerprint(JOB, PERIOD, 7)
    assert list(source.records(
        store=store, job=JOB, scheme=scheme, period=PERIOD, slot=7, give_up_after=None, limit=None
    )) == slot_ids[:1]
    store.ledger.reset(JOB, PERIOD, [99_999_999])
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=slot_ids[0], status=LedgerStatus.DONE, slot=7)])
    assert source._fingerprint(predicate) == store.ledger.settled_fingerprint(JOB, PERIOD, 7)

    def no_select(*args: object, **kwargs: object) -> None:
        raise AssertionError("a settled slot's ids were selected")

    monkeypatch.setattr(source, "_stream", no_select)
    assert list(source.records(
        store=store, job=JOB, scheme=scheme, period=PERIOD, slot=7, give_up_after=None, limit=None
    )) == []


def test_a_ledger_key_that_is_no_integer_never_matches_integer_ids(store: Store) -> None:
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=r, status=LedgerStatus.DONE, slot=3) for r in (3, 27)])
    numeric = store.ledger.settled_fingerprint(JOB, PERIOD, 3)
    assert numeric[:2] == (2, 2)
    store.ledger.mark(JOB, PERIOD, [LedgerEntry(record="meter-a", status=LedgerStatus.DONE, slot=3)])
    found = store.ledger.settled_fingerprint(JOB, PERIOD, 3)
    assert found[0] == 3 and found != numeric
