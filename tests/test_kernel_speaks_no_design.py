"""The kernel speaks no design's language: every module under ``fanoutsim/kernel/``
is parsed with :mod:`ast`, and none of its identifiers may hold a design word.

What counts as an identifier here (the rule):

* every name the kernel writes: variables and their uses (``Name``), attributes
  (``x.reactor``), function, class and argument names, keyword arguments,
  imported names and their aliases;
* every string constant that reads as an identifier — a dict key, a column, a
  trace kind, a crash point's or a fault kind's name: letters, digits, ``_``,
  ``.`` and ``-`` only, no space (``"reactor_name"``, ``"poll.after_fetch"``).
  A sentence (an error message) and a docstring may explain by example and are
  not looked at.

A name is split into words at ``_``, ``.``, ``-`` and camel-case humps, and a
word ending in ``s`` counts without it too (``Pollers`` -> ``poller``); a word
in :data:`DESIGN_WORDS` is a hit. :data:`FOREIGN` lists the few names that are
another library's API and happen to be such a word (``str.partition``, a DB-API
``cursor``): they are allowed only where the kernel calls them (an attribute or
a keyword argument), never as a name it defines.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import fanoutsim.kernel

KERNEL = Path(fanoutsim.kernel.__file__).parent

# the designs' own words: the reactor's, the outbox's, leases'
DESIGN_WORDS = frozenset(
    {
        "reactor",
        "workflow",
        "firing",
        "subscription",
        "tenant",
        "watermark",
        "stall",
        "poller",
        "outbox",
        "topic",
        "cursor",
        "notification",
        "backfill",
        "lease",
        "consumer",
        "partition",
        "ack",
        "nack",
    }
)
FOREIGN = frozenset({"partition", "cursor", "cursor_factory", "ClientCursor", "Cursor"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def words(name: str) -> set[str]:
    """``name``'s words, lower case, each also without a final ``s``."""
    out = set()
    for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name):
        w = w.lower()
        out.add(w)
        if w.endswith("s"):
            out.add(w[:-1])
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of every docstring and bare string statement (an attribute's doc)."""
    return {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
    }


def _names(node: ast.AST, docs: set[int]) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [] if node.attr in FOREIGN else [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg and node.arg not in FOREIGN else []
    if isinstance(node, ast.alias):
        return [node.asname or node.name]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
        return [node.value] if _IDENTIFIER.match(node.value) else []
    return []


def design_words_in(source: str) -> list[tuple[int, str]]:
    """Every (line, identifier) of ``source`` holding a design word."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [
        (getattr(node, "lineno", 0), name)
        for node in ast.walk(tree)
        for name in _names(node, docs)
        if words(name) & DESIGN_WORDS
    ]


def design_words_under(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Per module under ``root`` (its path relative to ``root``), its hits."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        hits = design_words_in(path.read_text(encoding="utf-8"))
        if hits:
            out[path.relative_to(root).as_posix()] = hits
    return out


def test_no_kernel_module_names_a_design_word():
    found = design_words_under(KERNEL)
    assert not found, "design words in fanoutsim/kernel identifiers:\n" + "\n".join(
        f"  {path}:{line}: {name}" for path, hits in found.items() for line, name in hits
    )


def test_the_rule_finds_design_words_in_what_the_kernel_writes():
    source = '''
"""A docstring may say reactor, workflow and cursor."""
from x import REACTOR_CRASH_POINTS
POINT = "poll.after_dispatch_before_watermark"

class Stall:
    tenant: str

def poll_limit(sub, now, limit, **where):
    seen = {"reactor_name": sub}
    cur = con.cursor(cursor_factory=x.ClientCursor)
    head, _, tail = "a.b".partition(".")
    trace.add(now, "subscription", "faults")
    raise ValueError("a message may name a workflow")
    return sub.workflow_name
'''
    assert sorted(name for _, name in design_words_in(source)) == sorted(
        [
            "REACTOR_CRASH_POINTS",
            "poll.after_dispatch_before_watermark",
            "Stall",
            "tenant",
            "reactor_name",
            "subscription",
            "workflow_name",
        ]
    )


def test_words_split_at_underscores_dots_and_humps_and_drop_a_plural():
    assert {"slow", "workflow"} <= words("SlowWorkflow")
    assert "poller" in words("pollers") and "lease" in words("LEASE_CRASH_POINTS")
    assert not words("release") & DESIGN_WORDS  # a word, not a substring
    assert not words("properties") & DESIGN_WORDS
