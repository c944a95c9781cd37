"""Stream offsets are unique and increasing per stream, whatever is cut meanwhile (both backends).

On SQLite the offsets were rowids, handed out again as ``max(id) + 1`` once the records holding the
highest ones had been cut into batches: two appends reported the same ``offsets 1..1`` (issue 14).
"""

from __future__ import annotations

import threading

from vardiya.store import Store, open_store
from vardiya.store.streams import Streams

APPENDERS = 4
APPENDS = 40


def _cut_everything(streams: Streams, stream: str) -> int:
    return streams.cut(
        stream, kind=f"batch:{stream}", batch_size=1_000, window_s=0, max_attempts=1, ordered=False, lanes=1,
        flush=True,
    )


def test_an_offset_is_not_handed_out_again_once_its_record_was_cut(store: Store) -> None:
    streams = Streams(store)
    (first,) = streams.append_many("s", [(None, {"n": 1})])
    assert _cut_everything(streams, "s") == 1  # the stream is empty again
    (second,) = streams.append_many("s", [(None, {"n": 2})])
    assert second > first


def test_concurrent_appenders_with_a_cutter_get_unique_increasing_offsets(store: Store, store_url: str) -> None:
    appended: list[list[int]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    finished = threading.Event()

    def append(n: int) -> None:
        try:
            with open_store(store_url) as own:
                streams = Streams(own)
                for k in range(APPENDS):
                    offsets = streams.append_many("s", [(None, {"n": n, "k": k, "i": i}) for i in range(1 + k % 3)])
                    with lock:
                        appended.append(offsets)
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            failures.append(error)

    def cut() -> None:
        try:
            with open_store(store_url) as own:
                streams = Streams(own)
                while not finished.is_set():
                    _cut_everything(streams, "s")
        except BaseException as error:  # noqa: BLE001
            failures.append(error)

    cutter = threading.Thread(target=cut)
    cutter.start()
    threads = [threading.Thread(target=append, args=(n,)) for n in range(APPENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    finished.set()
    cutter.join(timeout=300)

    assert failures == []
    assert len(appended) == APPENDERS * APPENDS
    every = [offset for offsets in appended for offset in offsets]
    assert len(set(every)) == len(every), "an offset was handed out twice"
    for offsets in appended:
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
