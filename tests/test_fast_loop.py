"""The fast loop's rules (tests/fast_loop.py) do what they say: if Hypothesis stopped reading the
attribute they set, or the sample stopped being stable, the fast loop would silently change."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import fast_loop


def test_a_hypothesis_test_runs_a_quarter_of_its_examples() -> None:
    runs: list[int] = []

    @settings(max_examples=80, database=None)
    @given(st.integers())
    def prop(x: int) -> None:
        runs.append(x)

    fast_loop.fewer_examples([SimpleNamespace(obj=prop), SimpleNamespace(obj=prop)])  # once per test
    prop()
    assert prop._hypothesis_internal_use_settings.max_examples == 20
    assert 0 < len(runs) <= 20


def test_the_sample_is_the_same_on_every_run_and_keeps_the_first_case() -> None:
    ids = [f"tests/x.py::test_y[case{i}]" for i in range(200)]
    kept = [i for i in ids if fast_loop.in_sample(i)]
    assert kept == [i for i in ids if fast_loop.in_sample(i)]
    assert 200 // fast_loop.SAMPLE_ONE_IN // 2 < len(kept) < 200 // fast_loop.SAMPLE_ONE_IN * 2

    class Item(SimpleNamespace):
        def add_marker(self, mark: pytest.MarkDecorator) -> None:
            self.marks.append(mark.name)

    items = [Item(nodeid=i, callspec=object(), marks=[]) for i in ids]
    few = [Item(nodeid=f"tests/x.py::test_z[{n}]", callspec=object(), marks=[]) for n in range(3)]
    fast_loop.sample_cases([*items, *few])
    assert items[0].marks == [] and all(item.marks == [] for item in few)
    assert [i.nodeid for i in items if not i.marks] == [ids[0], *[i for i in kept if i != ids[0]]]
