"""Stop-string benchmark: per-token cost of `StopStringMatcher` as the stop list grows.

    /work/venv/bin/python bench/stop.py            # writes bench/results/stop.md

"old" is the `str.find` path (`automaton=False`: the code every stop list went through
before the automaton; small lists still take it), "new" is what a matcher picks by default
(`uses_automaton`: the automaton past 4 strings or 64 chars). Each row feeds tokens of text
that never completes a stop string (so every token pays the full check) and reports the
best-of-9 mean microseconds per token (old and new alternating) and old/new.

Texts:
* prose: 4-char tokens of English; the stop strings are random letters (the common case);
* near miss: the text keeps extending a long prefix of the first stop string, so the held
  tail is as long as the longest string; the other strings are random. This is the input an
  adversary picks, and the old path's hold-back check is quadratic in the string length there.

Then the automaton itself for 1000 strings of 1000 chars: build time, the time to resolve
every failure link (the lazy work's upper bound, paid at most once per cached automaton),
memory, and the per-chunk cost of `from_state` (the stateless /derender stream's rebuild,
a cache hit), and the one-shot cut of the non-streaming derender, which stays on `str.find`.
"""

from __future__ import annotations

import argparse
import platform
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.stop import (StopAutomaton, StopStringMatcher, automaton_for, cut_at_stop_string,  # noqa: E402
                       uses_automaton)

PROSE = ("The quick brown fox jumps over the lazy dog, and then the story goes on for a while "
         "with more words that never form any of the stop strings. ") * 400
TIME_BUDGET_S = 0.25  # per measurement: the old path at 1000 x 1000 is slow


def random_strings(rng: random.Random, count: int, length: int) -> list[str]:
    return ["".join(rng.choices(string.ascii_letters, k=length)) for _ in range(count)]


def run_us(stop: list[str], tokens: list[str], automaton: bool | None) -> float:
    """Mean microseconds per feed over `tokens`, stopping early past the time budget."""
    m = StopStringMatcher(stop, automaton=automaton)
    fed = 0
    t0 = time.perf_counter()
    for token in tokens:
        m.feed(token)
        fed += 1
        if (fed & 15) == 0 and time.perf_counter() - t0 > TIME_BUDGET_S:
            break
    elapsed = time.perf_counter() - t0
    assert m.matched is None, "the benchmark text must not complete a stop string"
    return elapsed / fed * 1e6


def compare_us(stop: list[str], tokens: list[str], old: bool | None, new: bool | None,
               rounds: int = 9) -> tuple[float, float]:
    """Best of `rounds` for two settings of `automaton`, alternating so load affects both alike."""
    best_old = best_new = float("inf")
    for _ in range(rounds):
        best_old = min(best_old, run_us(stop, tokens, old))
        best_new = min(best_new, run_us(stop, tokens, new))
    return best_old, best_new


def scenario(rng: random.Random, kind: str, count: int, length: int) -> tuple[list[str], list[str]]:
    stop = random_strings(rng, count, length)
    if kind == "prose":
        stop = [s.replace("e", "#") for s in stop]  # no English word in them
        tokens = [PROSE[i:i + 4] for i in range(0, len(PROSE), 4)]
    else:  # near miss: the first string is "b" * (length - 1) + "!"; the text is all "b"
        stop[0] = "b" * (length - 1) + "!"
        stop = [stop[0]] + [s.replace("!", "#") for s in stop[1:]]
        tokens = ["bbbb"] * 3000
    return stop, tokens


def timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def automaton_costs(rng: random.Random) -> list[str]:
    rows = []
    for name, stop in [
        ("1000 x 1000 random", random_strings(rng, 1000, 1000)),
        ("1000 x 1000, shared 900-char prefix", ["p" * 900 + s for s in random_strings(rng, 1000, 100)]),
        ("1000 x 1000 of one letter (\"a\" * k + \"b\")", ["a" * (999 - i) + "b" * (i + 1) for i in range(1000)]),
        ("10000 x 100 random", random_strings(rng, 10000, 100)),
    ]:
        build_s, automaton = timed(lambda stop=stop: StopAutomaton(stop))
        assert isinstance(automaton, StopAutomaton)
        t0 = time.perf_counter()
        for v in range(automaton.size):
            automaton.resolve(v)
        resolve_s = time.perf_counter() - t0
        memory = (automaton.fail.itemsize + automaton.out.itemsize) * automaton.size + len(automaton.edges)
        rows.append(f"| {name} | {automaton.size:,} | {build_s * 1e3:.1f} | {resolve_s * 1e3:.0f} | "
                    f"{resolve_s / automaton.size * 1e6:.2f} | {memory / 1e6:.1f} |")
    return rows


def from_state_us(stop: list[str], held: str, n: int = 2000) -> float:
    automaton_for(stop)  # cached, as after the stream's first chunk
    state = [held, None]
    t0 = time.perf_counter()
    for _ in range(n):
        StopStringMatcher.from_state(stop, False, state)
    return (time.perf_counter() - t0) / n * 1e6


def one_shot_ms(rng: random.Random) -> list[str]:
    """`cut_at_stop_string` (non-streaming derender: one search over the whole text) vs feeding
    the same text to an automaton matcher, 100k chars of prose that never match."""
    text = PROSE[:100_000]
    rows = []
    for count in (10, 100, 1000):
        stop = [s.replace("e", "#") for s in random_strings(rng, count, 8)]

        def walk(stop: list[str] = stop) -> None:
            m = StopStringMatcher(stop, automaton=True)
            m.feed(text)
            assert m.matched is None

        walk()  # the cached automaton's failure links, resolved once
        find_s, found = timed(lambda stop=stop: cut_at_stop_string(text, len(text), stop, False))
        assert found == (text, None)
        walk_s, _ = timed(walk)
        rows.append(f"| {count} | {find_s * 1e3:.1f} | {walk_s * 1e3:.1f} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "stop.md"))
    args = parser.parse_args()
    rng = random.Random(5)
    lines = ["# Stop-string benchmark", "",
             f"`python bench/stop.py` on {time.strftime('%Y-%m-%d %H:%M')} (CPython {platform.python_version()}).",
             "", "## Per-token cost (us per feed, best of 9)", "",
             "| text | stop strings | chars each | new path | old us/token | new us/token | old / new |",
             "|---|---|---|---|---|---|---|"]
    for kind in ("prose", "near miss"):
        for count in (1, 4, 100, 1000):
            for length in (8, 1000):
                stop, tokens = scenario(rng, kind, count, length)
                old, new = compare_us(stop, tokens, False, None)
                path = "automaton" if uses_automaton(stop) else "find (same as old)"
                row = f"| {kind} | {count} | {length} | {path} | {old:.2f} | {new:.2f} | {old / new:.1f}x |"
                print(row, flush=True)
                lines.append(row)
    lines += ["", "Small lists (up to 4 strings, 64 chars) stay on the old path, so their rows differ only by noise.",
              "", "## Forcing the automaton on small lists (why the threshold)", "",
              "| stop strings | token chars | find us/token | automaton us/token |", "|---|---|---|---|"]
    small = ["\n\n", " thx", "fox jumps under", "###"]
    for stop in (small[1:2], small):
        for width in (4, 16, 64):
            tokens = [PROSE[i:i + width] for i in range(0, len(PROSE), width)]
            find, walk = compare_us(stop, tokens, False, True)
            row = f"| {len(stop)} | {width} | {find:.2f} | {walk:.2f} |"
            print(row, flush=True)
            lines.append(row)
    lines += ["", "The automaton walks each character in Python (~0.1 us each), `str.find` is flat in the token's",
              "length: for a few short strings it wins on long tokens, so they keep it.",
              "", "## The automaton", "",
              "| stop list | nodes | build ms | resolve all ms | us per node | memory MB |", "|---|---|---|---|---|---|"]
    for row in automaton_costs(rng):
        print(row, flush=True)
        lines.append(row)
    big = random_strings(rng, 1000, 1000)
    lines += ["", "Failure links are resolved lazily, on first visit, into arrays shared through the cache: a",
              "request pays only for the nodes its text reaches, and never more than \"resolve all\" in total.",
              "", "## `from_state` per chunk (cache hit), 1000 x 1000 random", "",
              "| held chars | us per from_state |", "|---|---|"]
    for held_len in (0, 10, 999):
        row = f"| {held_len} | {from_state_us(big, big[0][:held_len]):.2f} |"
        print(row, flush=True)
        lines.append(row)
    lines += ["", "## One-shot cut (non-streaming derender), 100k chars, 8-char strings", "",
              "| stop strings | str.find ms | automaton ms |", "|---|---|---|"]
    for row in one_shot_ms(rng):
        print(row, flush=True)
        lines.append(row)
    lines += ["", "C-speed `str.find` per string beats a Python walk of the whole text up to several hundred",
              "strings and is comparable around 1000, so `cut_at_stop_string` keeps it: once per response, its",
              "cost is (strings x text length), both bounded by the request body."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
