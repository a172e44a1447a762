"""The fast loop's rules (tests/fast_loop.py) do what they say: if Hypothesis stopped reading the
attribute they set, or the sample stopped being stable, the fast loop would silently change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
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
    # another process with another string-hash seed picks the same cases (no `hash()` in the sample)
    script = ("import sys; from tests import fast_loop; "
              "print(sum(1 << n for n in range(200) if fast_loop.in_sample(f'tests/x.py::test_y[case{n}]')))")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert int(other.stdout) == sum(1 << n for n, i in enumerate(ids) if i in kept)
    assert 200 // fast_loop.SAMPLE_ONE_IN // 2 < len(kept) < 200 // fast_loop.SAMPLE_ONE_IN * 2

    class Item(SimpleNamespace):
        def add_marker(self, mark: pytest.MarkDecorator) -> None:
            self.marks.append(mark.name)

    items = [Item(nodeid=i, callspec=object(), marks=[]) for i in ids]
    few = [Item(nodeid=f"tests/x.py::test_z[{n}]", callspec=object(), marks=[]) for n in range(3)]
    fast_loop.sample_cases([*items, *few])
    assert items[0].marks == [] and all(item.marks == [] for item in few)
    assert [i.nodeid for i in items if not i.marks] == [ids[0], *[i for i in kept if i != ids[0]]]
