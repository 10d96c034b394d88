"""CEL filters on subscriptions.

A subscription may carry a CEL expression (``when=``). It is compiled when the
subscription is written, so a malformed filter is rejected before any row
exists, and compiled again (once, then cached) by the poll loop. Only three
variables are bound at evaluation time:

``payload``  map of boundary source name -> JSON-decoded value
``reactor``  the reactor name (string)
``tenant``   the tenant id (string)

Any other free identifier is a mistake the author should hear about at
subscribe time, not a runtime error on every firing. Variables bound by a
comprehension macro (``payload.items.exists(x, x > 2)``) count as bound inside
that macro only.

Evaluation returns ``(value, error)``: ``value`` is a Python bool when the
program produced a CEL bool, otherwise ``None`` with ``error`` saying why. What
an error *means* (skip the firing or hold the watermark) is the poll loop's
policy, not this module's.

Two evaluators, one answer. A filter inside the compiled subset of
:mod:`fanoutsim.kernel.cel` runs as Python closures (a few µs); cel-python
(``celpy``, ~200 µs) stays the reference: it evaluates every filter outside the
subset, and it answers again whenever the fast path ends in anything but a
bool (an error or another type), so the error text in the trace and in
``last_predicate_error`` is always celpy's. ``compile_predicate(expr,
fast=False)``, or the environment variable ``FANOUTSIM_CEL=celpy`` read when a
filter is compiled, forces celpy for comparisons.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from lark import Token, Tree

from fanoutsim.kernel.cel import compile_fast, to_cel

#: The variables a filter may read: the firing's decoded payload, its reactor and its tenant.
ALLOWED_VARIABLES = ("payload", "reactor", "tenant")
# Cloacina keeps at most this many characters of an error's text in the
# subscription's row (``PREDICATE_TEXT_TRUNCATE_LEN``): its column is bounded,
# a user's filter and the errors it raises are not
PREDICATE_TEXT_LIMIT = 240
TRUNCATED_MARKER = "…[truncated]"
# CEL type identifiers are values too (``type(x) == int``).
_TYPE_IDENTS = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Grammar nodes that merely wrap a single child on the way down to an ident.
_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member", "primary"}
)

_ENV = celpy.Environment()
# FANOUTSIM_CEL=celpy: every filter compiled from then on is evaluated by celpy only.
CEL_ENV_VAR = "FANOUTSIM_CEL"
_BOOL = celtypes.BoolType


class InvalidPredicate(ValueError):
    """A CEL filter that does not compile or names an unknown variable."""


def _bare_ident(node: Any) -> str | None:
    while isinstance(node, Tree):
        if node.data == "ident":
            return str(node.children[0])
        if node.data not in _WRAPPERS or len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def free_variables(ast: Tree) -> set[str]:
    """Identifiers the expression reads that no macro binds."""
    free: set[str] = set()

    def visit(node: Any, bound: frozenset[str]) -> None:
        if not isinstance(node, Tree):
            return
        if node.data == "ident":
            name = str(node.children[0])
            if name not in bound and name not in _TYPE_IDENTS:
                free.add(name)
            return
        if node.data == "member_dot_arg":
            target, method, *rest = node.children
            args = rest[0].children if rest and isinstance(rest[0], Tree) else []
            if isinstance(method, Token) and str(method) in _MACROS and args:
                var = _bare_ident(args[0])
                if var is not None:
                    visit(target, bound)
                    for arg in args[1:]:
                        visit(arg, bound | {var})
                    return
        for child in node.children:
            visit(child, bound)

    visit(ast, frozenset())
    return free


def payload_paths(ast: Tree) -> tuple[tuple[str, ...], ...]:
    """The field paths under ``payload`` the expression reads: for every
    occurrence of ``payload``, its chain of plain field selections
    (``payload.quote.price`` -> ``("quote", "price")``; ``payload[k]`` or a bare
    ``payload`` -> ``()``, the whole payload). What the program can see of a
    firing is the value at each path, so equal values there give an equal result."""
    parents: dict[int, Tree] = {}
    roots: list[Tree] = []

    def index(node: Any) -> None:
        if not isinstance(node, Tree):
            return
        if node.data == "ident" and str(node.children[0]) == "payload":
            roots.append(node)
        for child in node.children:
            if isinstance(child, Tree):
                parents[id(child)] = node
            index(child)

    index(ast)
    paths = set()
    for ident in roots:
        path: list[str] = []
        node = parents.get(id(ident))  # primary
        node = parents.get(id(node)) if node is not None and node.data == "primary" else None  # member
        while node is not None and node.data == "member":
            up = parents.get(id(node))
            if up is None or up.data != "member_dot" or up.children[0] is not node:
                break
            path.append(str(up.children[1]))
            node = parents.get(id(up))
        paths.add(tuple(path))
    return tuple(sorted(paths))


def _at(value: Any, path: tuple[str, ...]) -> str:
    """The JSON text of ``value`` at ``path`` (types kept: 1, 1.0 and true differ),
    or, where the path breaks off, how deep it got and what was there."""
    for depth, field in enumerate(path):
        if not isinstance(value, dict) or field not in value:
            return f"missing {depth}:" + json.dumps(value, default=_typed)
        value = value[field]
    return json.dumps(value, default=_typed)


def _typed(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"  # whatever JSON has no word for, kept apart by type


class Predicate:
    """A compiled, checked CEL program. Build with :func:`compile_predicate`."""

    __slots__ = ("expr", "_program", "paths", "_fast")

    def __init__(self, expr: str, program: Any, paths: tuple[tuple[str, ...], ...] = ((),), fast: Any = None) -> None:
        #: The filter's CEL text, as given.
        self.expr = expr
        self._program = program
        #: The payload paths the filter reads (``(("quote", "price"),)``; ``((),)``: all of it).
        self.paths = paths  # what it reads of the payload (see payload_paths)
        self._fast = fast  # the compiled closure (fanoutsim.kernel.cel), or None: celpy only

    @property
    def fast(self) -> bool:
        """Whether the filter runs on the fast path (else celpy evaluates it)."""
        return self._fast is not None

    def inputs(self, sources: dict, reactor: str, tenant: str) -> tuple:
        """A key equal for two firings exactly when the program sees the same
        inputs in both, so one evaluation can answer for both (a cache key)."""
        return (reactor, tenant, *(_at(sources, p) for p in self.paths))

    def evaluate(self, activation: dict) -> tuple[bool | None, str | None]:
        """The filter over ``activation`` (``{"payload": ..., "reactor": ...,
        "tenant": ...}``): ``(True or False, None)``, or ``(None, why)`` when it
        fails — an evaluation error, or a result that is not a bool. It never raises."""
        fast = self._fast
        if fast is not None:
            try:
                result = fast(activation)
            except Exception:  # celpy says what went wrong, below
                result = None
            if result.__class__ is _BOOL:
                return bool(result), None
        try:
            result = self._program.evaluate(activation)
        except celpy.CELEvalError as exc:
            return None, f"evaluation error: {exc.args[0] if exc.args else exc}"
        except Exception as exc:  # celpy surfaces some type errors as Python exceptions
            return None, f"evaluation error: {type(exc).__name__}: {exc}"
        if isinstance(result, celpy.CELEvalError):
            return None, f"evaluation error: {result.args[0] if result.args else result}"
        # BoolType subclasses int: test the CEL type, not truthiness.
        if isinstance(result, celtypes.BoolType):
            return bool(result), None
        return None, f"predicate returned {type(result).__name__}, not bool"


def compile_predicate(expr: str, *, fast: bool | None = None) -> Predicate:
    """Compile and check a CEL filter, or raise :class:`InvalidPredicate`.

    ``fast``: use the compiled fast path where the filter is inside its subset
    (default: yes, unless the environment sets ``FANOUTSIM_CEL=celpy``);
    ``False`` evaluates with celpy only."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidPredicate(f"predicate must be a non-empty CEL string, got {expr!r}")
    if fast is None:
        engine = os.environ.get(CEL_ENV_VAR, "fast")
        if engine not in ("fast", "celpy"):
            raise RuntimeError(
                f"environment variable {CEL_ENV_VAR}={engine!r}: allowed values are "
                "'fast' (compiled closures, celpy outside their subset) and 'celpy'"
            )
        fast = engine == "fast"
    return _compile(expr, bool(fast))


# A Predicate is immutable, so one compiled program serves every subscription
# (and every incarnation) that carries the same text: at 10,000 subscriptions
# compiling each filter once per subscription would cost seconds of parsing.
# What dies with a crash is the engine's per-subscription cache, not this.
@lru_cache(maxsize=4096)
def _compile(expr: str, fast: bool) -> Predicate:
    try:
        ast = _ENV.compile(expr)
    except celpy.CELParseError as exc:
        raise InvalidPredicate(f"predicate {expr!r} is not valid CEL: {exc}") from None
    unknown = sorted(free_variables(ast) - set(ALLOWED_VARIABLES))
    if unknown:
        raise InvalidPredicate(
            f"predicate {expr!r} uses unknown variable(s) {', '.join(map(repr, unknown))}; "
            f"allowed variables: {', '.join(ALLOWED_VARIABLES)}"
        )
    compiled = compile_fast(ast, ALLOWED_VARIABLES) if fast else None
    return Predicate(expr, _ENV.program(ast), payload_paths(ast), compiled)


def activation(sources: dict, reactor: str, tenant: str) -> dict:
    """The CEL variables for one firing (build once per firing, reuse per subscription)."""
    return {
        "payload": to_cel(sources),  # celpy.json_to_cel's values, built faster
        "reactor": celtypes.StringType(reactor),
        "tenant": celtypes.StringType(tenant),
    }


# -- a predicate error in plain words -------------------------------------------------
_OPERATORS = {
    "relation_gt": ">",
    "relation_lt": "<",
    "relation_ge": ">=",
    "relation_le": "<=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
    "unary_neg": "-",
    "unary_not": "!",
}
_KINDS = {
    "IntType": "a number",
    "UintType": "a number",
    "DoubleType": "a number",
    "StringType": "a string",
    "BoolType": "true or false",
    "ListType": "a list",
    "MapType": "a map",
    "BytesType": "bytes",
    "TimestampType": "a timestamp",
    "DurationType": "a duration",
}


def _what(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)}"
    return f"{'a list' if isinstance(value, list) else 'an object'} {json.dumps(value, default=str)[:60]}"


def _kind_of(value: Any) -> str | None:
    if isinstance(value, bool):
        return _KINDS["BoolType"]
    if isinstance(value, (int, float)):
        return _KINDS["IntType"]
    if isinstance(value, list):
        return _KINDS["ListType"]
    if isinstance(value, dict):
        return _KINDS["MapType"]
    return _KINDS["StringType"] if isinstance(value, str) else None


def _odd_inputs(sources: Any, paths: tuple[tuple[str, ...], ...], expr: str) -> list[tuple[str, Any, str]]:
    """``(name, value, problem)`` of each payload path the filter reads that is
    missing, null, or runs through something that is not an object, in the
    order the filter names them."""
    out = []
    for path in sorted(paths, key=lambda p: (expr.find(".".join(p)) % (len(expr) + 1), p)):
        value: Any = sources
        for depth, field_ in enumerate(path):
            where = ".".join(("payload", *path[:depth]))
            if not isinstance(value, dict):
                out.append((where, value, f"{where} is {_what(value)}, not an object with '{field_}'"))
                break
            if field_ not in value:
                out.append((where, None, f"{where}.{field_} is missing"))
                break
            value = value[field_]
        else:
            name = ".".join(("payload", *path))
            out.append((name, value, f"{name} is {_what(value)}"))
    return out


def explain_error(expr: str, sources: Any, error: str) -> str:
    """A predicate error in plain words: what the filter ``expr`` read of the
    firing's ``sources`` and what its operator needed — ``"payload.quote.price
    is null; '>' needs a number"`` — rather than cel-python's message, which
    stays in the trace and in ``last_predicate_error`` as evaluated."""
    import re

    try:
        paths = compile_predicate(expr).paths
    except InvalidPredicate:
        paths = ()
    inputs = _odd_inputs(sources if isinstance(sources, dict) else {}, paths, expr)
    if error.startswith("predicate returned "):
        kind = _KINDS.get(error.split()[2].rstrip(","), error.split()[2])
        return f"the filter gives {kind}, not true or false; a filter must be a condition"
    missing = [p for _, _, p in inputs if "missing" in p or "not an object" in p]
    if missing:
        return f"{missing[0]}; the filter reads it, so it cannot decide"
    op = re.search(r"Token\('RULE', '(\w+)'\)", error)
    types = re.findall(r"celpy\.celtypes\.(\w+)", error)
    nulls = [(v, p) for _, v, p in inputs if v is None]
    symbol = _OPERATORS.get(op.group(1), op.group(1)) if op else None
    if symbol is not None:
        value, culprit = (
            nulls[0] if nulls else next(((v, p) for _, v, p in inputs), (None, "an input has the wrong type"))
        )
        own = _kind_of(value)
        needs = next((_KINDS[t] for t in types if t in _KINDS and _KINDS[t] != own), None)
        return f"{culprit}; '{symbol}' needs {needs or 'two values of one type'}"
    if nulls:
        return f"{nulls[0][1]}; the filter cannot use a null there"
    return f"the filter could not be evaluated on this payload ({error.removeprefix('evaluation error: ')})"


def truncate_predicate_text(text: str, limit: int = PREDICATE_TEXT_LIMIT) -> str:
    """``text`` as Cloacina stores it in ``last_predicate_error``: unchanged up
    to ``limit`` characters, else its first ``limit`` characters followed by
    :data:`TRUNCATED_MARKER` (which the limit does not count). A character is
    a code point, as Rust's ``chars()`` counts them, so a cut never splits one."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED_MARKER
