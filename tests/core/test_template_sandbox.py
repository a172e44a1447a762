"""The budget of a request's chat template (core/template_sandbox.py): the bounded sandbox renders
real templates exactly as the plain one (and transformers) do, refuses to build anything larger than
its budget before building it, and the deadline interrupts a render, never anything after it."""

from __future__ import annotations

import random
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.chat_template import build_conversation, load_template, render
from core.errors import RequestError
from core.deadline import deadline
from core.template_sandbox import TemplateBudget, TemplateTimeout, bounded
from tests.core.test_render_chat_template import WEATHER, hf_render, hf_tokenizers, message_strategy  # noqa: F401

BUDGET_CHARS = 1_000_000


def bounded_render(source: str, conversation, tools=None, kwargs=None, special_tokens=None, seconds: float = 10.0):
    budget = TemplateBudget(seconds=seconds, max_chars=BUDGET_CHARS)
    with bounded(budget):
        template = load_template(source, bounded=True)
        try:
            return render(template, conversation, tools=tools, kwargs=dict(kwargs or {}),
                          special_tokens=special_tokens or {}, budget=budget)
        except RequestError as exc:
            return ("error", exc.message)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=message_strategy(), with_tools=st.booleans(), generation_prompt=st.booleans(),
       family=st.sampled_from(["qwen3", "llama3"]))
def test_real_templates_render_the_same_under_a_budget(qwen3, llama3, hf_tokenizers, messages, with_tools,
                                                       generation_prompt, family):
    model = qwen3 if family == "qwen3" else llama3
    conversation = build_conversation(messages, "string", model.name)
    kwargs = {"add_generation_prompt": generation_prompt, "date_string": "26 Jul 2024"}
    tools = [WEATHER] if with_tools else None
    ours = bounded_render(model.tokenizer.chat_template, conversation, tools, kwargs,
                          model.tokenizer.special_tokens_map)
    assert ours == hf_render(hf_tokenizers[family], conversation, tools, kwargs)


MESSAGES = [{"role": "user", "content": "x"}]


@pytest.mark.parametrize("source,ok", [
    ("{{ 2 ** 100 }}", True), ("{{ 2 ** 70000 }}", False), ("{{ (2 ** 60000) * (2 ** 60000) }}", False),
    ("{{ 'ab' * 1000 }}", True), ("{{ 'ab' * 600000 }}", False), ("{{ [1] * 2000000 }}", False),
    ("{{ 'a' ~ 'b' }}", True), ("{% set s = 'a' * 600000 %}{{ s ~ s }}", False),
    ("{% set s = 'a' * 600000 %}{{ (s + s)|length }}", False),
    ("{{ 'x' * 3 + 'y' }}", True), ("{{ '%05d' % 3 }}", True), ("{{ '%01000001d' % 3 }}", False),
    ("{{ '{:>5}'.format(3) }}", True), ("{{ '{:>1000001}'.format(3) }}", False),
    ("{{ '{:>{w}}'.format(3, w=1000001) }}", False), ("{{ 'a'.center(1000001) }}", False),
    ("{{ 'a'|center(20) }}", True), ("{{ 'a'|center(1000001) }}", False),
    ("{{ ('a' * 1000)|replace('a', 'bb') }}", True), ("{{ ('a' * 1000)|replace('a', 'b' * 1001) }}", False),
    ("{{ ('a' * 1000).replace('', 'b' * 1000) }}", False), ("{{ ('\\t' * 1000).expandtabs(1001) }}", False),
    ("{{ ('a\\n' * 1000)|indent(1001) }}", False), ("{{ ('a' * 1000)|wordwrap(1, wrapstring='x' * 1001) }}", False),
    ("{{ (['a' * 1000] * 1000)|join('') }}", True), ("{{ (['a' * 1000] * 1001)|join('') }}", False),
    ("{{ ([[1, [2]]] * 100)|tojson(indent=2) }}", True), ("{{ ([[1, [2, [3]]]] * 10000)|tojson(indent=10) }}", False),
    ("{% set l = ['a' * 600000] %}{{ l * 2 }}", False), ("{% set l = ['a' * 600000] * 2 %}{{ l }}", False),
    ("{% set x %}{% for i in range(1000) %}{{ 'a' * 1001 }}{% endfor %}{% endset %}{{ x|length }}", False),
    ("{% for i in range(1001) %}{{ 'a' * 1000 }}{% endfor %}", False),
    ("{% macro m() %}{{ 'a' * 1000 }}{% endmacro %}{% for i in range(1001) %}{{ m() }}{% endfor %}", False),
])
def test_sizes_are_checked_before_anything_large_is_built(source, ok):
    result = bounded_render(source, [{"role": "user", "content": "x"}])
    if ok:
        assert isinstance(result, str), result
    else:
        assert isinstance(result, tuple) and "chat template" in result[1], result


def test_all_strings_built_together_are_bounded_too():
    # each string is small; together they pass 32 times the budget
    source = ("{% set ns = namespace(n=0) %}{% for i in range(100000) %}{% set ns.s = ('a' * 999) ~ i %}"
              "{% endfor %}x")
    result = bounded_render(source, MESSAGES)
    assert isinstance(result, tuple) and "in all" in result[1], result


def test_the_deadline_interrupts_a_render_that_builds_nothing():
    source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
    t0 = time.monotonic()
    with pytest.raises(TemplateTimeout):
        bounded_render(source, MESSAGES, seconds=0.3)
    assert time.monotonic() - t0 < 5


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
def test_the_deadline_never_fires_after_its_block():
    """Blocks that end before, at or after their deadline: the timeout is raised inside the block
    or not at all, never in the code that follows (it runs in the HTTP layer's threads). Work and
    deadlines both spread over 0.5-10 ms, so on any machine some blocks end just as theirs passes."""
    rng = random.Random(7)
    for _ in range(200):
        try:
            with deadline(rng.uniform(0.0005, 0.01)):
                end = time.perf_counter() + rng.uniform(0.0005, 0.01)
                while time.perf_counter() < end:
                    pass
        except TemplateTimeout:
            pass
        after = time.perf_counter() + 0.002  # Python code after the block: nothing may arrive here
        while time.perf_counter() < after:
            pass


def test_a_deadline_interrupts_only_its_own_thread():
    other_done = threading.Event()

    def other() -> None:
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            pass
        other_done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with pytest.raises(TemplateTimeout):
        with deadline(0.1):
            while True:
                pass
    thread.join()
    assert other_done.is_set()


def test_outside_a_render_the_bounded_sandbox_is_the_plain_one():
    template = load_template("{{ ('a' * 2000000)|length }}", bounded=True)  # no budget in force
    assert template.compiled.render() == "2000000"
