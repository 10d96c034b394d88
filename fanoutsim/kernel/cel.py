"""A fast path for CEL: celpy's parse tree compiled into Python closures.

cel-python (``celpy``) interprets a CEL program by walking its lark parse tree
on every evaluation; most of the ~200 µs it spends on a typical filter goes to
the walk (method lookup per node, nine wrapper nodes per operand, activation
cloning), not to the operations. :func:`compile_fast` walks the tree once and
returns a closure per node, so an evaluation is a few nested calls.

celpy stays the reference. The closures mirror ``celpy.evaluation.Evaluator``
(with celpy's base functions) node for node and evaluate over the same values
(``celpy.celtypes``, as ``celpy.json_to_cel`` builds them; :func:`to_cel`
builds the same values faster). Every operation calls the very function celpy
calls (``operator.add`` on ``IntType``, ``celtypes.logical_or``,
``evaluation.operator_in``, ...) and catches exactly the exceptions the
Evaluator catches at that node, except a few hot cases inlined with the same
result: comparisons of two scalars, ``&&``/``||``/``!`` on two bools, int64
``+ - * / %``, ``in`` over a list, ``size``, string methods with a constant
argument, a field path on a variable. That keeps celpy's semantics including
its quirks, which a hand-written CEL would get "right" and so differ: both
sides of ``&&`` and ``||`` are evaluated and an error on one side is absorbed
when the other decides; int and double do not mix in ``==`` or ``+`` (int and
uint do in ``+``), but a double or a uint on the *left* of ``<`` compares with
an int, and ``true == 1`` is true while ``1 == true`` is an error; int64 and
uint64 overflow and division or modulo by zero are errors; ``size(null)`` is
0; an error inside ``map``, ``filter`` or ``exists_one`` is raised rather
than kept as a value, so ``true || [0].map(x, 1 / x)[0] == 1`` is an error in
celpy and here.

Errors are values here as in celpy (``CELEvalError``), and a Python exception
that celpy would let escape escapes here too (a value the fast path does not
model, a name container or a message, or ``string()`` of a map holding an
error, whose text is celpy's repr of it, raises ``_Unsupported``: the caller
asks celpy). What is outside the subset is
not compiled (:func:`compile_fast` returns ``None``): ``reduce`` and ``min``,
message construction (``T{...}``), ``.name`` and ``.f()`` at the root, bytes
literals, ``type()``, timestamps and durations, functions and methods other
than those in :data:`FUNCTIONS` and :data:`METHODS`, identifiers other than
the declared variables and those a macro binds. A caller that needs celpy's
exact error *text* asks celpy again when the fast path ends in an error (an
error is rare; the text is celpy's).

``tests/test_cel_fast.py`` checks the two against each other with hypothesis
over generated expressions and payloads: same value, same CEL type, same
error-versus-value outcome.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeGuard

import re2
from celpy import celtypes
from celpy.adapter import json_to_cel  # what celpy.json_to_cel is (celpy re-exports it untyped)
from celpy.evaluation import (
    CELEvalError,
    NameContainer,
    base_functions,
    celstr,
    eval_error,
    operator_in,
)
from lark import Token, Tree

__all__ = ["FUNCTIONS", "METHODS", "MACROS", "compile_fast", "to_cel"]

BoolType, IntType, UintType, DoubleType = (celtypes.BoolType, celtypes.IntType, celtypes.UintType, celtypes.DoubleType)
StringType, ListType, MapType = celtypes.StringType, celtypes.ListType, celtypes.MapType
TRUE, FALSE = BoolType(True), BoolType(False)

# Functions (``f(x)``) and methods (``x.f(y)``) compiled; each calls celpy's own.
FUNCTIONS = frozenset(
    {"size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string", "bool"}
)
METHODS = frozenset({"size", "contains", "startsWith", "endsWith", "matches"})
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_CELPY_MACROS = MACROS | {"reduce", "min"}  # celpy treats these method names as macros

# Types whose same-type comparison is one Python operator, exactly what celpy
# ends up calling (type_matched passes for equal types).
_SCALARS = frozenset({IntType, UintType, DoubleType, StringType, BoolType})

# dict's own get, not MapType's: a member of a CEL map read as celpy reads it
_map_get: Callable[[Any, Any, Any], Any] = dict.get
_and_oper = eval_error("no such overload", TypeError)(celtypes.logical_and)
_or_oper = eval_error("no such overload", TypeError)(celtypes.logical_or)

Scope = dict[str, Any]  # variable name -> celtypes value
Node = Callable[[Scope], Any]  # a compiled node: its value (celtypes, or a CELEvalError) in a scope
# A CEL program as celpy's parser gives it. Its leaves are Tokens, but a child is
# read by the shape celpy's grammar gives it (a tree here, a token there), which
# Tree[Token] cannot say: Tree[Any] lets the compiler read it that way.
Ast = Tree[Any]


class _Const(Protocol):
    """A compiled node whose value is known when compiled (:func:`_const`)."""

    const: Any

    def __call__(self, s: Scope) -> Any: ...


def _is_const(f: Node) -> TypeGuard[_Const]:
    return hasattr(f, "const")


class _NotCompiled(Exception):
    """The expression is outside the compiled subset: celpy evaluates it."""


def compile_fast(ast: Ast, variables: Iterable[str]) -> Node | None:
    """A closure ``run(activation) -> value`` for the CEL program ``ast`` (from
    ``celpy.Environment().compile``), or ``None`` when the program uses
    something outside the compiled subset.

    ``activation`` maps each name in ``variables`` to a celtypes value, as for
    celpy's ``Runner.evaluate``. ``run`` returns what celpy's Evaluator would
    return before raising: a celtypes value or a ``CELEvalError`` value; it
    raises where celpy raises (and ``KeyError`` for an unbound variable)."""
    try:
        return _Compiler(frozenset(variables)).node(ast, frozenset())
    except _NotCompiled:
        return None


def _error(text: str, ex: BaseException | None = None) -> CELEvalError:
    if ex is None:
        return CELEvalError(text)
    return CELEvalError(text, ex.__class__, ex.args)


class _Compiler:
    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables

    def node(self, tree: Any, bound: frozenset[str]) -> Node:
        if not isinstance(tree, Tree):
            raise _NotCompiled(repr(tree))
        method = getattr(self, "c_" + str(tree.data), None)
        if method is None:
            raise _NotCompiled(str(tree.data))
        compiled: Node = method(tree, bound)
        return compiled

    # -- wrappers -------------------------------------------------------------

    def _single(self, tree: Ast, bound: frozenset[str]) -> Node:
        if len(tree.children) != 1:
            raise _NotCompiled(str(tree.data))
        return self.node(tree.children[0], bound)

    c_member = _single

    # -- expr: the ternary (Evaluator.expr) ----------------------------------------

    def c_expr(self, tree: Ast, bound: frozenset[str]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0], bound)
        if len(tree.children) != 3:
            raise _NotCompiled("expr")
        cond, yes, no = (self.node(c, bound) for c in tree.children)
        condition = celtypes.logical_condition

        def ternary(s: Scope) -> Any:
            c = cond(s)
            left = right = FALSE
            try:
                if c.__class__ is BoolType:  # logical_condition would pick the same branch
                    return yes(s) if c else no(s)
                if c:
                    left = yes(s)
                else:
                    right = no(s)
                return condition(c, left, right)
            except TypeError as ex:
                return _error("found no matching overload for _?_:_", ex)

        return ternary

    # -- || and && (both sides evaluated, as celpy does) ---------------------------

    def _logic(
        self,
        tree: Ast,
        bound: frozenset[str],
        logical: Callable[[Any, Any], Any],
        pick: Callable[[Any, Any], Any],
        op: str,
    ) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0], bound)
        left, right = (self.node(c, bound) for c in tree.children)
        message = f"found no matching overload for _{op}_"

        def logic(s: Scope) -> Any:
            a, b = left(s), right(s)
            if a.__class__ is BoolType and b.__class__ is BoolType:
                return pick(a, b)
            try:
                return logical(a, b)
            except TypeError as ex:
                return _error(message, ex)

        return logic

    def c_conditionalor(self, tree: Ast, bound: frozenset[str]) -> Node:
        return self._logic(tree, bound, celtypes.logical_or, lambda a, b: a if a else b, "||")

    def c_conditionaland(self, tree: Ast, bound: frozenset[str]) -> Node:
        return self._logic(tree, bound, celtypes.logical_and, lambda a, b: b if a else a, "&&")

    # -- relations ----------------------------------------------------------------

    def _binary(self, tree: Ast, bound: frozenset[str], build: Callable[[str, Node, Node], Node]) -> Node:
        """A left-associative binary node (``a < b``, ``a + b``, ``a * b``): its
        one child compiled through, or ``build(kind, left, right)`` over its operands."""
        if len(tree.children) == 1:
            return self.node(tree.children[0], bound)
        op_tree, right_tree = tree.children
        left = self._single(op_tree, bound)
        return build(str(op_tree.data), left, self.node(right_tree, bound))

    def c_relation(self, tree: Ast, bound: frozenset[str]) -> Node:
        return self._binary(tree, bound, self._relation)

    @classmethod
    def _relation(cls, kind: str, left: Node, right: Node) -> Node:
        if kind == "relation_in":
            return cls._relation_in(kind, left, right)
        return cls._comparison(kind, left, right)

    @staticmethod
    def _relation_in(kind: str, left: Node, right: Node) -> Node:
        """``a in b``: over a list of scalars celpy's ``operator_in`` without its
        logging (the same comparisons, in order), else ``operator_in`` itself."""
        scalars = _SCALARS

        def in_(s: Scope) -> Any:
            a, b = left(s), right(s)
            if b.__class__ is ListType and a.__class__ in scalars:
                # operator_in without its logging: the same comparisons, in order
                result: celtypes.BoolType | CELEvalError = FALSE
                for c in b:
                    try:
                        if c == a:
                            return TRUE
                    except TypeError as ex:
                        result = _error("no such overload", ex)
                return result
            try:
                return operator_in(a, b)
            except TypeError as ex:
                return _error(f"found no matching overload for {kind!r}", ex)

        return in_

    @staticmethod
    def _comparison(kind: str, left: Node, right: Node) -> Node:
        """``a <op> b``: two scalars of one type compared directly, else celpy's
        ``bool_<op>`` inlined (its errors, its NotImplemented)."""
        func = base_functions[_RELATIONS[kind]]
        op = _COMPARE[kind]
        scalars = _SCALARS
        not_implemented = NotImplemented
        assert func.__name__ == "bool_" + kind[len("relation_") :]  # inlined below

        def compare(s: Scope) -> Any:
            a, b = left(s), right(s)
            t = a.__class__
            if t is b.__class__ and t in scalars:
                return TRUE if op(a, b) else FALSE
            # celpy's bool_<op>, i.e. boolean(operator.<op>), inlined (for two
            # scalars the error checks are moot and op never returns NotImplemented)
            if t in scalars and b.__class__ in scalars:
                try:
                    return TRUE if op(a, b) else FALSE
                except TypeError as ex:
                    return _error(f"found no matching overload for {kind!r}", ex)
            if isinstance(a, CELEvalError):
                return a
            if isinstance(b, CELEvalError):
                return b
            try:
                r = op(a, b)
            except TypeError as ex:
                return _error(f"found no matching overload for {kind!r}", ex)
            if r == not_implemented:
                return r
            return TRUE if r else FALSE

        return compare

    # -- arithmetic -------------------------------------------------------------------

    def c_addition(self, tree: Ast, bound: frozenset[str]) -> Node:
        return self._binary(tree, bound, _arithmetic)

    c_multiplication = c_addition

    def c_unary(self, tree: Ast, bound: frozenset[str]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0], bound)
        op_tree, right_tree = tree.children
        kind = str(op_tree.data)
        right = self.node(right_tree, bound)
        if kind == "unary_not":
            return _unary(kind, right, celtypes.logical_not, bools=True)
        if kind != "unary_neg":
            raise _NotCompiled(kind)
        return _unary(kind, right, operator.neg, bools=False)

    # -- members ------------------------------------------------------------------------

    def c_member_dot(self, tree: Ast, bound: frozenset[str]) -> Node:
        member_tree, name_token = tree.children
        missing = _MISSING
        chain = _field_chain(tree)
        if chain is not None and (chain[0] in bound or chain[0] in self.variables):
            root, names = chain[0], tuple(chain[1:])

            def path(s: Scope) -> Any:  # payload.quote.price: the selections below, in one loop
                v = s[root]
                for name in names:
                    if v.__class__ is MapType:
                        x = _map_get(v, name, missing)
                        v = x if x is not missing else _error(f"no such member in mapping: {name!r}")
                    else:
                        v = _select(v, name)
                return v

            return path
        member = self.node(member_tree, bound)
        name = str(name_token)

        def dot(s: Scope) -> Any:
            m = member(s)
            if m.__class__ is MapType:
                v = _map_get(m, name, missing)
                if v is not missing:
                    return v
                return _error(f"no such member in mapping: {name!r}")
            return _select(m, name)

        return dot

    def c_member_index(self, tree: Ast, bound: frozenset[str]) -> Node:
        member_tree, index_tree = tree.children
        member = self.node(member_tree, bound)
        index = self.node(index_tree, bound)
        getitem = operator.getitem

        def item(s: Scope) -> Any:
            m, i = member(s), index(s)
            try:
                return getitem(m, i)
            except TypeError as ex:
                return _error("found no matching overload for _[_]", ex)
            except KeyError as ex:
                return _error("no such key", ex)
            except IndexError as ex:
                return _error("invalid_argument", ex)

        return item

    def c_member_dot_arg(self, tree: Ast, bound: frozenset[str]) -> Node:
        member_tree, name_token = tree.children[:2]
        name = str(name_token)
        if name in _CELPY_MACROS:
            return self._macro(tree, name, bound)
        if name not in METHODS:
            raise _NotCompiled(f"method {name}")
        member = self.node(member_tree, bound)
        args = self._exprlist(tree.children[2], bound) if len(tree.children) > 2 else _const(ListType())
        function = base_functions[name]
        fast = self._string_method(name, member, args)
        if fast is not None:
            return fast
        if name == "size" and getattr(args, "const", None) == []:
            return _size(member)

        def method(s: Scope) -> Any:
            obj = member(s)
            values = args(s)
            if isinstance(obj, CELEvalError):
                return obj
            if isinstance(values, CELEvalError):
                return values
            return _apply(function, obj, *values)

        return method

    @staticmethod
    def _string_method(name: str, member: Node, args: Node) -> Node | None:
        """A string method with a constant string argument (``s.startsWith('us')``):
        celpy's function inlined for a string receiver, celpy's function otherwise."""
        const = getattr(args, "const", None)
        if (
            name not in ("startsWith", "endsWith", "contains", "matches")
            or not isinstance(const, ListType)
            or len(const) != 1
            or const[0].__class__ is not StringType
        ):
            return None
        (arg,) = const
        assert isinstance(arg, StringType)  # checked above, by its exact class
        function = base_functions[name]
        test: Callable[[str], bool]
        if name == "matches":
            try:
                search = re2.compile(arg).search  # re2.search(pattern, text), compiled once
            except re2.error:
                return None
            test = lambda text: search(text) is not None  # noqa: E731
        elif name == "startsWith":
            test = lambda text: text.startswith(arg)  # noqa: E731
        elif name == "endsWith":
            test = lambda text: text.endswith(arg)  # noqa: E731
        else:
            test = lambda text: arg in text  # noqa: E731

        def string_method(s: Scope) -> Any:
            obj = member(s)
            if obj.__class__ is StringType:
                return TRUE if test(obj) else FALSE
            if isinstance(obj, CELEvalError):
                return obj
            return _apply(function, obj, arg)

        return string_method

    def _macro(self, tree: Ast, name: str, bound: frozenset[str]) -> Node:
        if name not in MACROS or len(tree.children) != 3:
            raise _NotCompiled(f"macro {name}")
        args = tree.children[2]
        if not isinstance(args, Tree) or len(args.children) != 2:
            raise _NotCompiled(f"macro {name} arguments")
        var = _bare_ident(args.children[0])
        if var is None:
            raise _NotCompiled(f"macro {name} variable")
        member = self.node(tree.children[0], bound)
        body = self.node(args.children[1], bound | {var})
        if name in ("map", "filter", "exists_one"):
            return self._list_macro(name, member, body, var)
        return self._quantifier(name, member, body, var)

    @staticmethod
    def _list_macro(name: str, member: Node, body: Node, var: str) -> Node:
        """``map``, ``filter`` and ``exists_one`` over ``member``'s items, as
        celpy's ``build_macro_eval``: an error in the body raises."""

        def sub_expr(s: Scope, v: Any) -> Any:  # Evaluator.build_macro_eval: raises errors
            inner = dict(s)
            inner[var] = v
            r = body(inner)
            if isinstance(r, CELEvalError):
                raise r
            return r

        if name in ("map", "filter"):
            build: Callable[[Callable[[Any], Any], Any], Iterable[Any]] = map if name == "map" else filter

            def map_or_filter(s: Scope) -> Any:
                items = member(s)
                if isinstance(items, CELEvalError):
                    return items
                return ListType(build(lambda v: sub_expr(s, v), items))

            return map_or_filter

        def exists_one(s: Scope) -> Any:
            items = member(s)
            if isinstance(items, CELEvalError):
                return items
            count = sum(1 for v in items if bool(sub_expr(s, v)))
            return BoolType(count == 1)

        return exists_one

    @staticmethod
    def _quantifier(name: str, member: Node, body: Node, var: str) -> Node:
        """``all`` and ``exists`` over ``member``'s items, as celpy's
        ``build_ss_macro_eval``: the body's errors are values, folded by
        ``logical_and`` / ``logical_or`` (so a later true or false can absorb them)."""

        def ss_expr(s: Scope, v: Any) -> Any:  # build_ss_macro_eval: errors as values
            inner = dict(s)
            inner[var] = v
            try:
                r = body(inner)
            except CELEvalError as ex:
                return ex
            return r

        oper, start = (_and_oper, TRUE) if name == "all" else (_or_oper, FALSE)
        is_all = name == "all"

        def quantifier(s: Scope) -> Any:
            items = member(s)
            if isinstance(items, CELEvalError):
                return items
            acc: Any = start  # a bool, an error, or what celpy's logical_and/or made of them
            for r in map(lambda v: ss_expr(s, v), items):
                if acc.__class__ is BoolType and r.__class__ is BoolType:
                    acc = (r if acc else acc) if is_all else (acc if acc else r)
                else:
                    acc = oper(acc, r)
            return acc

        return quantifier

    # -- primary --------------------------------------------------------------------------

    def c_primary(self, tree: Ast, bound: frozenset[str]) -> Node:
        if len(tree.children) != 1:
            raise _NotCompiled("primary")
        child = tree.children[0]
        kind = str(child.data)
        if kind == "literal":
            return _const(_literal(child))
        if kind == "paren_expr":
            return self._single(child, bound)
        if kind == "list_lit":
            if not child.children:
                return lambda s: ListType()
            return self._exprlist(child.children[0], bound)
        if kind == "map_lit":
            return self._map_lit(child, bound)
        if kind == "ident_arg":
            return self._call(child, bound)
        if kind == "ident":
            name = str(child.children[0])
            if name not in bound and name not in self.variables:
                raise _NotCompiled(f"identifier {name}")
            return lambda s: s[name]
        raise _NotCompiled(kind)

    def _exprlist(self, tree: Ast, bound: frozenset[str]) -> Node:
        """Evaluator.exprlist: every item evaluated; the first error, or the list."""
        if tree.data != "exprlist":
            raise _NotCompiled(str(tree.data))
        items = tuple(self.node(c, bound) for c in tree.children)
        consts = [f for f in items if _is_const(f)]
        if len(consts) == len(items) and not any(isinstance(f.const, CELEvalError) for f in consts):
            return _const(ListType([f.const for f in consts]))  # never mutated: CEL builds new lists

        def exprlist(s: Scope) -> Any:
            values = [f(s) for f in items]
            for v in values:
                if isinstance(v, CELEvalError):
                    return v
            return ListType(values)

        return exprlist

    def _map_lit(self, tree: Ast, bound: frozenset[str]) -> Node:
        if not tree.children:
            return lambda s: MapType()
        inits = tree.children[0]
        if inits.data != "mapinits":
            raise _NotCompiled(str(inits.data))
        items = tuple(self.node(c, bound) for c in inits.children)

        def map_lit(s: Scope) -> Any:
            try:
                values = [f(s) for f in items]
                result = MapType()
                for key, value in zip(values[0::2], values[1::2]):
                    if key in result:
                        raise ValueError(f"Duplicate key {key!r}")
                    result[key] = value
                return result
            except (ValueError, TypeError) as ex:
                return _error(ex.args[0], ex)  # as celpy: an exception without args escapes

        return map_lit

    def _call(self, tree: Ast, bound: frozenset[str]) -> Node:
        name = str(tree.children[0])
        args_tree = tree.children[1] if len(tree.children) == 2 else Tree("exprlist", [])
        if len(tree.children) > 2 or args_tree.data != "exprlist":
            raise _NotCompiled(f"call {name}")
        args = tuple(self.node(c, bound) for c in args_tree.children)
        if name in ("has", "dyn"):
            if len(args) != 1:
                raise _NotCompiled(f"{name} arity")
            (arg,) = args
            if name == "dyn":
                return arg
            return lambda s: FALSE if isinstance(arg(s), CELEvalError) else TRUE
        if name not in FUNCTIONS:
            raise _NotCompiled(f"function {name}")
        function = base_functions[name]
        if name == "size" and len(args) == 1:
            return _size(args[0])

        shows = name == "string"

        def call(s: Scope) -> Any:
            values = [f(s) for f in args]
            for v in values:
                if isinstance(v, CELEvalError):
                    return v
                if shows and _holds_error(v):
                    # the text would be celpy's repr of the error, its tree included
                    raise _Unsupported("string() of a map holding an error")
            return _apply(function, *values)

        return call


class _Unsupported(Exception):
    """Raised at evaluation time for a value the fast path does not model;
    the caller then asks celpy."""


def _holds_error(value: Any) -> bool:
    """Whether a map (or a list of maps) holds an error as a value: only a map
    literal keeps one (a list literal is the error)."""
    if isinstance(value, dict):
        return any(isinstance(v, CELEvalError) or _holds_error(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_error(v) for v in value)
    return False


_MISSING = object()
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_new_int = int.__new__  # _new_int(IntType, 3) is IntType(3) without its conversions


def _int_div(a: int, b: int) -> int:  # IntType.__truediv__: truncates toward zero
    sign = (-1 if a < 0 else 1) * (-1 if b < 0 else 1)
    return sign * (abs(a) // abs(b))


def _int_mod(a: int, b: int) -> int:  # IntType.__mod__: the sign of the dividend
    return (-1 if a < 0 else 1) * (abs(a) % abs(b))


# kind -> (celpy's operator, the int64 operation IntType's method makes of it)
_ARITHMETIC: dict[str, tuple[Callable[[Any, Any], Any], Callable[[int, int], int]]] = {
    "addition_add": (operator.add, int.__add__),
    "addition_sub": (operator.sub, int.__sub__),
    "multiplication_mul": (operator.mul, int.__mul__),
    "multiplication_div": (operator.truediv, _int_div),
    "multiplication_mod": (operator.mod, _int_mod),
}
_NO_EXCEPTIONS: tuple[type[BaseException], ...] = ()


def _arithmetic(kind: str, left: Node, right: Node) -> Node:
    """``a + b``, ``a - b``, ``a * b``, ``a / b``, ``a % b``: two ints by the
    int64 operation inlined, anything else by celpy's operator, with the errors
    celpy's Evaluator makes of its exceptions (a multiplication's also of ZeroDivisionError)."""
    func, int_op = _ARITHMETIC[kind]
    divides = kind in ("multiplication_div", "multiplication_mod")
    by_zero = (ZeroDivisionError,) if kind.startswith("multiplication_") else _NO_EXCEPTIONS

    def arithmetic(s: Scope) -> Any:
        a, b = left(s), right(s)
        if a.__class__ is IntType and b.__class__ is IntType:  # IntType.__add__ / __mul__ / ...
            if divides and not b:
                return _error("modulus or divide by zero")
            r = int_op(a, b)
            if _INT64_MIN <= r <= _INT64_MAX:
                return _new_int(IntType, r)
            return _error("return error for overflow")
        try:
            return func(a, b)
        except TypeError as ex:
            return _error(f"found no matching overload for {kind!r}", ex)
        except by_zero as ex:
            return _error("modulus or divide by zero", ex)
        except (ValueError, OverflowError) as ex:
            return _error("return error for overflow", ex)

    return arithmetic


def _unary(kind: str, right: Node, func: Callable[[Any], Any], *, bools: bool) -> Node:
    """``!a`` (``bools``: a bool negated directly) and ``-a`` by celpy's function,
    with the errors celpy's Evaluator makes of its exceptions."""

    def unary(s: Scope) -> Any:
        v = right(s)
        if bools and v.__class__ is BoolType:
            return FALSE if v else TRUE
        try:
            return func(v)
        except TypeError as ex:
            return _error(f"found no matching overload for {kind!r}", ex)
        except ValueError as ex:
            return _error("return error for overflow", ex)

    return unary


def _apply(function: Callable[..., Any], *values: Any) -> Any:
    """celpy's ``function`` on evaluated values, its exceptions as the errors
    celpy's Evaluator makes of them (a call, a method)."""
    try:
        return function(*values)
    except ValueError as ex:
        return _error("return error for overflow", ex)
    except (TypeError, AttributeError) as ex:
        return _error("no such overload", ex)


def _size(arg: Node) -> Node:
    """celpy's function_size (``size(x)``, ``x.size()``) inlined: ``null`` has
    size 0, an unsized value is "no such overload"."""

    def size(s: Scope) -> Any:
        v = arg(s)
        if isinstance(v, CELEvalError):
            return v
        if v is None:
            return _new_int(IntType, 0)
        try:
            return _new_int(IntType, len(v))
        except TypeError as ex:
            return _error("no such overload", ex)

    return size


def to_cel(value: Any) -> Any:
    """``celpy.json_to_cel(value)``, the same celtypes values, built without
    celtypes' conversions for the plain JSON types (anything else, and an int
    outside int64, goes to json_to_cel itself)."""
    t = value.__class__
    if t is str:
        return _new_str(StringType, value)
    if t is dict:
        result = MapType()
        dict.update(result, {to_cel(k): to_cel(v) for k, v in value.items()})
        return result
    if t is float:
        return _new_float(DoubleType, value)
    if t is int and _INT64_MIN <= value <= _INT64_MAX:
        return _new_int(IntType, value)
    if t is bool:
        return _new_int(BoolType, value)
    if value is None:
        return None
    if t is list:
        return ListType([to_cel(v) for v in value])
    return json_to_cel(value)


_new_str, _new_float = str.__new__, float.__new__


def _const(value: Any) -> Node:
    """A closure returning ``value``, marked as a constant (``.const``)."""

    def const(s: Scope) -> Any:
        return value

    const.const = value  # type: ignore[attr-defined]
    return const


_RELATIONS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_ge": "_>=_",
    "relation_gt": "_>_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "_in_",
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "relation_lt": operator.lt,
    "relation_le": operator.le,
    "relation_ge": operator.ge,
    "relation_gt": operator.gt,
    "relation_eq": operator.eq,
    "relation_ne": operator.ne,
}


def _select(m: Any, name: str) -> Any:
    """Evaluator.member_dot on an evaluated member ``m``: ``m.name``."""
    if isinstance(m, CELEvalError):
        return m
    if isinstance(m, (NameContainer, celtypes.MessageType)):
        raise _Unsupported("field selection on a name container or message")
    if isinstance(m, MapType):
        try:
            return m[name]
        except KeyError:
            return _error(f"no such member in mapping: {name!r}")
    return _error(f"{m!r} with type: '{type(m)}' does not support field selection")


def _field_chain(tree: Ast) -> list[str] | None:
    """``[root, f1, f2, ...]`` when ``tree`` (a member_dot) is ``root.f1.f2...``
    with ``root`` a plain identifier, else None."""
    names: list[str] = []
    node: Any = tree
    while isinstance(node, Tree) and node.data == "member_dot":
        names.append(str(node.children[1]))
        node = node.children[0]
        while isinstance(node, Tree) and node.data == "member" and len(node.children) == 1:
            node = node.children[0]
    if (
        isinstance(node, Tree)
        and node.data == "primary"
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
        and node.children[0].data == "ident"
    ):
        return [str(node.children[0].children[0]), *reversed(names)]
    return None


def _bare_ident(node: Any) -> str | None:
    """The name when ``node`` is a bare identifier under single-child wrappers."""
    while isinstance(node, Tree):
        if node.data == "ident":
            return str(node.children[0])
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def _literal(tree: Ast) -> Any:
    """Evaluator.literal, once at compile time."""
    if len(tree.children) != 1:
        raise _NotCompiled("literal")
    token = tree.children[0]
    assert isinstance(token, Token), "a literal's one child is its token"
    try:
        if token.type == "FLOAT_LIT":
            return DoubleType(token.value)
        if token.type == "INT_LIT":
            return IntType(token.value)
        if token.type == "UINT_LIT":
            if token.value[-1].lower() != "u":
                raise _NotCompiled("uint literal")
            return UintType(token.value[:-1])
        if token.type in ("MLSTRING_LIT", "STRING_LIT"):
            return celstr(token)
        if token.type == "BOOL_LIT":
            return BoolType(token.value.lower() == "true")
        if token.type == "NULL_LIT":
            return None
    except ValueError as ex:
        return _error(ex.args[0], ex)
    raise _NotCompiled(f"literal {token.type}")
