"""The README: a first screen that says what fanoutsim is, the two commands,
what you will see and where to go next; examples that run as written; and
every example's comment matching what it prints.

The rule for comments: a ``print(...)`` line in a python block ends in a
comment that quotes, between backticks, text its output contains; a command
line in a sh block says what it does, and the test runs it and checks that.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from clitools import cli

from fanoutsim import examples

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_first_screen_says_what_it_is_the_two_commands_and_where_to_go_next():
    first = "\n".join(README.splitlines()[:40])  # a first screen: 40 lines
    assert "See how durable event fan-out behaves" in first
    assert "make demo" in first and "make test" in first
    assert ".venv/bin/fanoutsim" in first and "source .venv/bin/activate" in first  # how to call the CLI
    assert "out/demo/" in first  # what you will see, and where it went
    assert "make docs" in first and "docs/_build/html/" in first  # where to go next
    assert len(README.splitlines()) < 200  # the long reference lives in the documentation site


def test_the_readme_says_what_a_predicate_error_does_under_each_policy():
    from fanoutsim.designs.reactor.config import SchedulerConfig

    policies = SchedulerConfig.__dataclass_fields__["predicate_error_policy"]
    assert policies.default == "skip"
    for policy in ("skip", "hold"):
        assert re.search(rf"\* `\"{policy}\"`[^*]*watermark", README), policy


# Every python block as a reader pastes them: in order, into one interpreter
# (``python -c``: a __main__ without a file, like the interactive prompt), in a
# folder of its own. Each print line is numbered, so its output can be checked
# against its comment.
_RUN_BLOCKS = r"""
import builtins, io, json, sys, traceback
blocks = json.loads(sys.stdin.read())
said = {}

def checked_print(tag, *args, **kwargs):
    out = io.StringIO()
    builtins.print(*args, **{**kwargs, "file": out})
    said.setdefault(tag, []).append(out.getvalue())
    builtins.print(*args, **kwargs)

namespace = {"__name__": "__main__", "__said__": checked_print}
for i, (line, code) in enumerate(blocks):
    try:
        exec(compile(code, f"README.md, python block {i + 1} at line {line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
sys.stderr.write("\n--- said " + json.dumps(said) + "\n")
"""

_PRINT = re.compile(r"^(\s*)print\((.*?)\)(\s*#\s*(.*))?$")


def _instrumented() -> tuple[list[tuple[int, str]], dict[str, tuple[int, list[str]]]]:
    """The python blocks with each ``print(`` line made a call that records its
    output under a tag, and per tag: the README line and the quoted claims."""
    out, claims = [], {}
    for m in re.finditer(r"```python\n(.*?)```", README, flags=re.S):
        first = README.count("\n", 0, m.start()) + 2
        lines = []
        for k, line in enumerate(m.group(1).splitlines()):
            p = _PRINT.match(line)
            if p is None:
                lines.append(line)
                continue
            tag = f"L{first + k}"
            claims[tag] = (first + k, re.findall(r"`([^`]+)`", p.group(4) or ""))
            lines.append(f"{p.group(1)}__said__({tag!r}, {p.group(2)})")
        out.append((first, "\n".join(lines) + "\n"))
    return out, claims


def test_every_python_block_runs_and_every_print_says_what_its_comment_quotes(tmp_path):
    code, claims = _instrumented()
    assert len(code) >= 2 and len(claims) >= 5
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MPLBACKEND": "Agg",
    }
    done = subprocess.run(
        [sys.executable, "-c", _RUN_BLOCKS],
        input=json.dumps(code),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    said = json.loads(done.stderr.rsplit("--- said ", 1)[1])
    for tag, (line, quoted) in claims.items():
        assert quoted, f"README.md line {line}: a print without a `quoted` claim in its comment"
        assert tag in said, f"README.md line {line}: the print never ran"
        for claim in quoted:
            assert any(claim in text for text in said[tag]), (
                f"README.md line {line}: the comment says `{claim}`; it printed {said[tag]}"
            )


def test_the_commands_after_make_demo_do_what_their_comments_say(tmp_path):
    [first] = [b for b in blocks("sh") if "fanoutsim example" in b]
    commands = [line.split("#")[0].split() for line in first.splitlines() if line.startswith("fanoutsim ")]
    assert [c[:2] for c in commands] == [
        ["fanoutsim", "example"],
        ["fanoutsim", "example"],
        ["fanoutsim", "run"],
        ["fanoutsim", "explain"],
    ]
    listed = cli(*commands[0][1:], cwd=tmp_path)  # the scenarios that ship with fanoutsim
    assert listed.returncode == 0 and all(name in listed.stdout for name in examples.names())
    wrote = cli(*commands[1][1:], cwd=tmp_path)  # write one out to edit
    assert wrote.returncode == 0 and (tmp_path / "crashes.toml").read_text() == examples.path("crashes").read_text()
    ran = cli(*commands[2][1:], "--until", "600", "--out", str(tmp_path / "out"), cwd=tmp_path)
    # crashes and failing inserts: duplicates with causes
    assert ran.returncode == 0 and "extra deliveries by ambiguous_insert (expected)" in ran.stdout
    # each duplicated firing: its subscription and cause (the run's folder, here the test's own)
    assert commands[3][2] == "out/crashes"
    told = cli(*commands[3][1:2], str(tmp_path / "out"), *commands[3][3:], cwd=tmp_path)
    assert told.returncode == 0 and "pricing_reactor->audit@acme" in told.stdout
    assert " ambiguous_insert\n" in told.stdout and "an insert whose answer was lost" in told.stdout
