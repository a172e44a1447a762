"""Budgets for chat templates that come with a request (`--trust-request-chat-template`).

A server's own template is the operator's code; a request's template is the client's, run on our
CPU and memory. Jinja's sandbox keeps it away from Python's internals but not from unbounded
work: `{{ 9 ** 9 ** 7 }}` computes for seconds in one C call, `'a' * 10**9` allocates a
gigabyte, nested loops run for ever. So a request template is compiled in `BoundedSandbox` and
rendered under a `TemplateBudget`:

* size: no operation may build a string (or list) longer than the prompt could ever be
  (`max_chars`: the model's context length times its longest token), and all of them together
  at most `TOTAL_FACTOR` times that. The sandbox checks before the operation runs, so nothing
  large is ever allocated: `*`, `**`, `+`, `%`, `~` (string concatenation), every filter and
  method call (their int arguments, and the known amplifiers: `replace`, `join`, `center`,
  `indent`, `wordwrap`, `format`, `tojson`...), `{{ }}` output and block captures; integers
  stay under `MAX_INT_BITS`;
* time: the render (and the compile) must end within `seconds`; a watchdog thread raises
  `TemplateTimeout` in the rendering thread when it does not (`core/deadline.py`: loops that
  build nothing). Every operation that could take long in one C call is bounded by size.

Going over either budget raises `TemplateBudgetExceeded` (or `TemplateTimeout`); the caller turns
it into a 400. The render itself runs in the HTTP layer's thread pool (`core.render.request_size`
counts a request template as large work), so a template using its whole time budget never stalls
the event loop.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jinja2.compiler
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from core.deadline import DeadlineExceeded, deadline

TOTAL_FACTOR = 32  # all strings a template builds, together, at most this many times max_chars
MAX_INT_BITS = 1 << 16  # ~20,000 digits: integer arithmetic stays in microseconds
_DIGITS = re.compile(r"\d+")


class TemplateBudgetExceeded(Exception):
    """A request's template went over its size budget (a 400 for the client)."""


# A request's template went over its time budget (raised in the rendering thread by the watchdog)
TemplateTimeout = DeadlineExceeded


@dataclass
class TemplateBudget:
    seconds: float
    max_chars: int
    used: int = 0

    def check(self, size: int, what: str) -> None:
        if size > self.max_chars:
            raise TemplateBudgetExceeded(
                f"The chat template would build {what} of {size} characters or items; a request's chat "
                f"template may build at most {self.max_chars}.")

    def charge(self, size: int, what: str = "a value") -> None:
        self.check(size, what)
        self.used += size
        if self.used > TOTAL_FACTOR * self.max_chars:
            raise TemplateBudgetExceeded(
                f"The chat template built more than {TOTAL_FACTOR * self.max_chars} characters in all; a "
                "request's chat template may build at most that.")

    def check_int(self, value: int) -> None:
        if value.bit_length() > MAX_INT_BITS:
            raise TemplateBudgetExceeded(f"The chat template would compute an integer of more than {MAX_INT_BITS} "
                                         "bits; a request's chat template may not.")


_CURRENT: ContextVar[TemplateBudget | None] = ContextVar("template_budget", default=None)


# -- sizes, estimated without building anything --------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def text_size(value: Any, limit: int) -> int:
    """An estimate (from above, roughly) of len(str(value)), without building it; stops counting
    once past `limit` (then returns a number past it)."""
    if isinstance(value, str):
        return len(value)
    if _is_int(value):
        return value.bit_length() // 3 + 2
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) + 4
        elif isinstance(item, dict):
            size += 2 + 2 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            size += 2 + 2 * len(item)
            stack.extend(item)
        elif _is_int(item):
            size += item.bit_length() // 3 + 2
        else:
            size += 32
        if size > limit:
            return size
    return size


def _shape(value: Any, limit: int) -> tuple[int, int]:
    """(nodes, depth) of a JSON-like value, counting stops past `limit` nodes."""
    nodes, depth = 0, 0
    stack = [(value, 1)]
    while stack and nodes <= limit:
        item, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, level + 1) for v in item)
    return nodes, depth


def _result_size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


def _check_ints(budget: TemplateBudget, args: tuple, kwargs: dict[str, Any]) -> None:
    """An int argument larger than any string the template may build is a width, a count or a
    tab size that would make one (ljust, center, zfill, expandtabs, indent...)."""
    for value in itertools.chain(args, kwargs.values()):
        if _is_int(value):
            budget.check(abs(value), "a padding or repetition")


def _check_format(budget: TemplateBudget, text: str) -> None:
    """Widths and precisions written in a format string (`%09999999d`, `{:>9999999}`)."""
    for match in _DIGITS.finditer(text):
        digits = match.group()
        budget.check(int(digits) if len(digits) < 12 else budget.max_chars + 1, "a formatted field")


def _estimate_str_method(budget: TemplateBudget, name: str, s: str, args: tuple, kwargs: dict[str, Any]
                         ) -> int | None:
    """The size of `s.<name>(*args)` for the str methods whose output can outgrow their input."""
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        old, new = args[0], args[1]
        count = s.count(old) if old else len(s) + 1
        if len(args) > 2 and _is_int(args[2]) and args[2] >= 0:
            count = min(count, args[2])
        return len(s) + count * max(0, len(new) - len(old))
    if name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        return len(s) + s.count("\t") * (tabsize if _is_int(tabsize) else 8)
    if name == "join" and args and isinstance(args[0], (list, tuple)):
        items = args[0]
        return sum(text_size(x, budget.max_chars) for x in items) + len(s) * max(0, len(items) - 1)
    return None


# -- filters --------------------------------------------------------------------------------------

def _estimate_filter(budget: TemplateBudget, name: str, args: tuple, kwargs: dict[str, Any]) -> int | None:
    """The size of the output of the built-in filters that can outgrow their input (`args` start
    at the filtered value)."""
    if not args:
        return None
    value = args[0]
    limit = budget.max_chars
    if name == "replace" and isinstance(value, str):
        return _estimate_str_method(budget, "replace", value, args[1:], kwargs)
    if name == "indent" and isinstance(value, str):
        width = args[1] if len(args) > 1 else kwargs.get("width", 4)
        per_line = len(width) if isinstance(width, str) else (width if _is_int(width) else 4)
        return len(value) + (value.count("\n") + 1) * max(0, per_line)
    if name == "wordwrap" and isinstance(value, str):
        width = args[1] if len(args) > 1 else kwargs.get("width", 79)
        wrap = args[3] if len(args) > 3 else kwargs.get("wrapstring") or "\n"
        lines = len(value) // max(1, width if _is_int(width) else 79) + 1
        return len(value) + lines * (len(wrap) if isinstance(wrap, str) else 1)
    if name == "join":
        sep = args[1] if len(args) > 1 else kwargs.get("d", "")
        if isinstance(value, (list, tuple)):
            return (sum(text_size(x, limit) for x in value)
                    + (len(sep) if isinstance(sep, str) else 0) * max(0, len(value) - 1))
        return None
    if name == "format" and isinstance(value, str):
        _check_format(budget, value)
        return len(value) + sum(text_size(a, limit) for a in itertools.chain(args[1:], kwargs.values()))
    if name == "tojson":
        indent = args[2] if len(args) > 2 else kwargs.get("indent")
        size = text_size(value, limit)
        if _is_int(indent) and indent > 0:
            nodes, depth = _shape(value, limit)
            size += nodes * (indent * depth + 1)
        elif isinstance(indent, str):
            nodes, depth = _shape(value, limit)
            size += nodes * (len(indent) * depth + 1)
        return size
    if name in ("string", "pprint", "center"):
        width = (args[1] if len(args) > 1 else kwargs.get("width", 80)) if name == "center" else 0
        return max(text_size(value, limit), width if _is_int(width) else 0)
    return None


def _bounded_filter(name: str, fn: Any) -> Any:
    from jinja2.utils import _PassArg

    skip = 1 if _PassArg.from_obj(fn) is not None else 0  # (context, eval context or environment first)

    @functools.wraps(fn)  # (keeps jinja_pass_arg)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = _CURRENT.get()
        if budget is not None:
            _check_ints(budget, args[skip + 1:], kwargs)
            estimate = _estimate_filter(budget, name, args[skip:], kwargs)
            if estimate is not None:
                budget.check(estimate, f"the output of the {name} filter")
        result = fn(*args, **kwargs)
        if budget is not None:
            budget.charge(_result_size(result), f"the output of the {name} filter")
        return result

    return bounded


# -- the sandbox ----------------------------------------------------------------------------------

class _BoundedBuffer(list):
    """The buffer of a block capture, macro or filter block: its text counted as it grows."""

    __slots__ = ("size",)

    def __init__(self) -> None:
        super().__init__()
        self.size = 0

    def append(self, item: Any) -> None:
        budget = _CURRENT.get()
        if budget is not None:
            size = text_size(item, budget.max_chars)
            self.size += size
            budget.check(self.size, "a block's output")
            budget.charge(size, "a block's output")
        super().append(item)

    def extend(self, items: Any) -> None:
        for item in items:
            self.append(item)


class _BoundedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Jinja's compiler with `~` and block buffers routed through the budget."""

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        if frame.eval_ctx.volatile:
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            join = "markup_join"
        else:
            join = "str_join"
        self.write(f"environment.bounded_concat({join}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def buffer(self, frame: jinja2.compiler.Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.new_buffer()")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every way to build something large checked against the budget
    of the render in progress (`render_bounded`); outside a render it behaves as the plain one."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _BoundedCodeGenerator

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=self._finalize, **options)

    def bound_filters(self) -> None:
        """Wrap every filter (call once the environment's filters are final)."""
        self.filters = {name: _bounded_filter(name, fn) for name, fn in self.filters.items()}

    @staticmethod
    def new_buffer() -> list:
        return _BoundedBuffer()

    @staticmethod
    def bounded_concat(join: Any, parts: tuple) -> Any:
        budget = _CURRENT.get()
        if budget is not None:
            budget.charge(sum(text_size(p, budget.max_chars) for p in parts), "a string (~)")
        return join(parts)

    @staticmethod
    def _finalize(value: Any) -> Any:
        budget = _CURRENT.get()
        if budget is not None and not isinstance(value, str):  # (strings are counted as output)
            budget.charge(text_size(value, budget.max_chars), "an output")
        return value

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = _CURRENT.get()
        if budget is not None:
            _check_binop(budget, operator, left, right)
        result = self.binop_table[operator](left, right)
        if budget is not None:
            budget.charge(_result_size(result), "a string or list")
            if _is_int(result):
                budget.check_int(result)
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = _CURRENT.get()
        if budget is not None:
            _check_ints(budget, args, kwargs)
            owner = getattr(__obj, "__self__", None)
            name = getattr(__obj, "__name__", "")
            if isinstance(owner, str):
                if name == "join" and args and not isinstance(args[0], (list, tuple, str)):
                    args = (list(args[0]), *args[1:])  # (a generator: counted once, then joined)
                estimate = _estimate_str_method(budget, name, owner, args, kwargs)
                if estimate is not None:
                    budget.check(estimate, f"the result of {name}()")
        result = ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
        if budget is not None:
            budget.charge(_result_size(result), "a call's result")
        return result

    def wrap_str_format(self, value: Any) -> Any:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        text = value.__self__

        def bounded(*args: Any, **kwargs: Any) -> str:
            budget = _CURRENT.get()
            if budget is not None:
                _check_format(budget, text)
                _check_ints(budget, args, kwargs)
                budget.check(len(text) + sum(text_size(a, budget.max_chars)
                                             for a in itertools.chain(args, kwargs.values())), "a formatted string")
            result = wrapper(*args, **kwargs)
            if budget is not None:
                budget.charge(len(result), "a formatted string")
            return result

        return bounded


def _check_binop(budget: TemplateBudget, op: str, left: Any, right: Any) -> None:
    if op == "**":
        if _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
            if right > MAX_INT_BITS or right * left.bit_length() > MAX_INT_BITS:
                budget.check_int(1 << (MAX_INT_BITS + 1))
    elif op == "*":
        if _is_int(left) and _is_int(right):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                budget.check_int(1 << (MAX_INT_BITS + 1))
            return
        seq, times = (left, right) if _is_int(right) else (right, left)
        if _is_int(times) and isinstance(seq, (str, list, tuple, bytes)):
            budget.check(len(seq) * max(0, times), "a repeated string or list")
    elif op == "+":
        if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            budget.check(len(left) + len(right), "a string or list (+)")
    elif op == "%" and isinstance(left, str):
        _check_format(budget, left)
        values = right if isinstance(right, tuple) else (right,)
        _check_ints(budget, values, {})
        budget.check(len(left) + sum(text_size(v, budget.max_chars) for v in values), "a formatted string (%)")


def render_bounded(template: Any, budget: TemplateBudget, /, **variables: Any) -> str:
    """Render a template compiled in a BoundedSandbox under `budget`'s sizes (its time is
    `bounded`'s). The output counts too: at most `max_chars`."""
    token = _CURRENT.set(budget)
    try:
        out: list[str] = []
        size = 0
        for chunk in template.generate(**variables):
            size += len(chunk)
            budget.check(size, "an output")
            out.append(chunk)
        return "".join(out)
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def bounded(budget: TemplateBudget) -> Iterator[None]:
    """The whole life of a request template, compile included (Jinja folds constant filter calls
    at compile time: `{{ 'a'|center(10**9) }}` runs there), under `budget`: its sizes, and its
    time (TemplateTimeout)."""
    token = _CURRENT.set(budget)
    try:
        with deadline(budget.seconds):
            yield
    finally:
        _CURRENT.reset(token)
