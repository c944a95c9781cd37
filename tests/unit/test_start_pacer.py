"""The started-marker chunks follow the handlers: one item at a time for slow ones, whole claims for fast."""

from __future__ import annotations

from vardiya.invoke.pacing import StartPacer


def test_slow_handlers_are_marked_one_at_a_time() -> None:
    pacer = StartPacer(ahead_s=0.05)
    assert pacer.size == 1
    for _ in range(10):
        assert pacer.ran(1, 0.4) == 1


def test_fast_handlers_grow_the_chunk_up_to_the_limit() -> None:
    pacer = StartPacer(ahead_s=0.05, most=128)
    sizes = [pacer.ran(pacer.size, 0.001) for _ in range(10)]
    assert sizes[:4] == [2, 4, 8, 16]
    assert sizes[-1] == 128


def test_a_chunk_that_took_too_long_shrinks_in_proportion() -> None:
    pacer = StartPacer(ahead_s=0.05)
    pacer.size = 64
    assert pacer.ran(64, 0.2) == 16  # 64 items in 0.2 s: 16 fit 0.05 s
    assert pacer.ran(10, 0.01) == 16  # a short claim that ran quickly says nothing about a bigger chunk
    assert pacer.ran(0, 5.0) == 16  # nothing ran
