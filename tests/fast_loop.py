"""The fast loop (`pytest -m "not slow" -n 2`): the same tests, fewer cases, so that it runs in under
two minutes on 2 cores; CI runs everything (no `-m`).

Two rules, applied at collection only when the run selects `not slow`:
* a parametrized test with many cases (recorded fixtures, parser families) keeps its first case and a
  fixed sample of the others (by a hash of the case id, so the sample is the same on every run and
  a new case falls in it or not once and for all); the rest are marked `slow`;
* a Hypothesis test runs a quarter of its examples (at least `MIN_EXAMPLES`).
A failure the fast loop cannot see is then found by CI's full run, which is what it is for.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from typing import Any

import pytest

MANY_CASES = 6  # a parametrized test with fewer cases runs them all
SAMPLE_ONE_IN = 8  # of a test with many cases, the first and one in SAMPLE_ONE_IN of the others
EXAMPLE_SHARE = 4  # a Hypothesis test runs 1 / EXAMPLE_SHARE of its examples
MIN_EXAMPLES = 10


def is_fast_loop(config: pytest.Config) -> bool:
    return (config.option.markexpr or "").replace(" ", "") == "notslow"


def in_sample(nodeid: str) -> bool:
    return zlib.crc32(nodeid.encode()) % SAMPLE_ONE_IN == 0


def sample_cases(items: list[pytest.Item]) -> None:
    """Mark `slow` the cases of many-case parametrized tests that are not in the sample."""
    cases: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        if hasattr(item, "callspec"):
            cases[item.nodeid.split("[", 1)[0]].append(item)
    for group in cases.values():
        if len(group) < MANY_CASES:
            continue
        for item in group[1:]:
            if not in_sample(item.nodeid):
                item.add_marker(pytest.mark.slow)


def fewer_examples(items: list[pytest.Item]) -> None:
    """A quarter of each Hypothesis test's examples (its own settings kept otherwise)."""
    from hypothesis import settings

    done: set[int] = set()
    for item in items:
        test: Any = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        # hypothesis reads the settings from this attribute of the wrapped test at each call
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is None or id(test) in done:
            continue
        done.add(id(test))
        test._hypothesis_internal_use_settings = settings(
            current, max_examples=max(MIN_EXAMPLES, current.max_examples // EXAMPLE_SHARE))


def apply(config: pytest.Config, items: list[pytest.Item]) -> None:
    if is_fast_loop(config):
        sample_cases(items)
        fewer_examples(items)
