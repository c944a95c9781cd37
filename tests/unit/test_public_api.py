"""The package's public names are deliberate: ``__all__`` lists exactly what is exported."""

from __future__ import annotations

import vardiya
import vardiya.errors


def test_all_names_exist() -> None:
    for name in vardiya.__all__:
        assert hasattr(vardiya, name), name


def test_all_is_sorted_and_unique() -> None:
    assert len(set(vardiya.__all__)) == len(vardiya.__all__)


def test_every_error_is_a_vardiya_error_and_exported() -> None:
    for name in vardiya.errors.__all__:
        error = getattr(vardiya.errors, name)
        assert issubclass(error, vardiya.VardiyaError)
        assert name in vardiya.__all__


def test_all_lists_are_sorted() -> None:
    import vardiya.invoke
    import vardiya.pipeline
    import vardiya.slots
    import vardiya.store

    for module in (vardiya, vardiya.invoke, vardiya.pipeline, vardiya.slots, vardiya.store):
        assert list(module.__all__) == sorted(module.__all__), module.__name__
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
