"""The generated pages of the documentation site, written by ``conf.py`` at each build.

* ``lessons/notebooks/*.ipynb`` — the notebooks, copied as they are stored (myst-nb
  renders their saved outputs; nothing is executed), and the experiments' modules
  they link to, in ``lessons/notebooks/experiments/``;
* ``scenario-<design>.md`` — every key of a design's scenario files, from
  ``data/schemas/<design>.schema.json`` (these and the next two in ``_generated/``);
* ``causes.md`` — every duplicate and loss cause each design's checker names,
  in plain words, from ``Design.causes``;
* ``metrics.md`` — the metrics each design counts, read from a short run of
  one of its shipped scenarios (names, kind, labels), with what each measures
  (``Design.metrics``);
* ``api/<page>.md`` — the Python API reference's entries, one per public object, from
  the list of what is public and where (``apiref.py``, beside this file): each
  ``docs/reference/api/<page>.md`` includes its page's.
* ``howto-<name>-command.md``, ``howto-<name>-output.md`` and
  ``howto-<name>.png`` — a how-to's sweep (:data:`HOWTO_SWEEPS`): the command
  as the reader types it, what it printed when run here, and its figure. The
  command runs again whenever fanoutsim's code or the command changes (a
  stamp of both is kept beside them), so neither the output nor the figure
  can drift from the code.

Only what changed is rewritten, so Sphinx rebuilds only the pages that moved.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any, NamedTuple

if str(Path(__file__).resolve().parent) not in sys.path:  # conf.py puts docs/ there; a test may not
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import apiref  # noqa: E402  (docs/apiref.py, beside this file)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def generate_all(out: Path, root: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lessons(out.parent / "lessons" / "notebooks", root / "notebooks")
    for schema in sorted((root / "data" / "schemas").glob("*.schema.json")):
        design = schema.name.removesuffix(".schema.json")
        _write(out / f"scenario-{design}.md", scenario_page(design, json.loads(schema.read_text())))
    _write(out / "causes.md", causes_page())
    _write(out / "metrics.md", metrics_page())
    for page, sections in apiref.PAGES.items():
        _write(out / "api" / f"{page}.md", api_page(sections))
    for name, sweep in HOWTO_SWEEPS.items():
        howto_sweep(out, root, name, sweep)


# -- the lessons ----------------------------------------------------------------------
def lessons(out: Path, notebooks: Path) -> None:
    """The stored notebooks, by file name (the site links to them as ``lessons/NAME``),
    and beside them the experiments' modules they link to (``experiments/leases.py``):
    a link to a file that is not a page becomes a download of that file on the site,
    so the one link opens the module in JupyterLab and on the site alike."""
    _mirror(out, sorted(notebooks.glob("*.ipynb")), "*.ipynb")
    modules = [p for p in sorted((notebooks / "experiments").glob("*.py")) if not p.name.startswith("_")]
    _mirror(out / "experiments", modules, "*.py")


def _mirror(out: Path, files: list[Path], pattern: str) -> None:
    """``out`` holds a copy of each of ``files`` and nothing else matching ``pattern``."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = {p.name for p in files}
    for old in out.glob(pattern):
        if old.name not in wanted:
            old.unlink()
    for path in files:
        target = out / path.name
        if not target.exists() or target.read_bytes() != path.read_bytes():
            shutil.copyfile(path, target)


def jupyterlab_slug(title: str) -> str:
    """A heading's anchor as JupyterLab makes it (its text, spaces as ``-``, case kept):
    ``00_index.ipynb#Glossary`` then finds the heading in JupyterLab and on the site."""
    return title.strip().replace(" ", "-")


# -- the scenario reference -----------------------------------------------------------
def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# a string alternative's pattern in words (one not here is shown as the pattern it is)
_PATTERNS = {r".\.duckdb$": "a path ending in `.duckdb`", r"^postgres(ql)?://.": "a `postgresql://` URI"}


def _type(prop: dict, definitions: dict) -> str:
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in prop:
            shown = [_alternative(p, prop, definitions) for p in prop[key]]
            return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return definitions.get(name, {}).get("description", name) if name not in ("duration",) else "duration"
    kind = prop.get("type", "")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array" and "items" in prop:
        return f"array of {_type(prop['items'], definitions)}"
    bounds = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in prop:
            bounds.append(f"{sign} {prop[key]}")
    return f"{kind} {', '.join(bounds)}".strip() or "any"


def _alternative(alt: dict, parent: dict, definitions: dict) -> str:
    """One of a key's alternatives: one with no type of its own has its parent's,
    and one that is only a pattern says what it matches (alone it would read "any")."""
    if "pattern" in alt and len(alt.keys() - {"type"}) == 1:
        kind = alt.get("type", parent.get("type", "string"))
        return _PATTERNS.get(alt["pattern"], f"{kind} matching `{alt['pattern']}`")
    return _type({"type": parent["type"], **alt} if "type" in parent else alt, definitions)


def _table(props: dict, required: list, definitions: dict) -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, prop in props.items():
        default = "required" if key in required else (f"`{json.dumps(prop['default'])}`" if "default" in prop else "")
        rows.append(
            f"| `{key}` | {_cell(_type(prop, definitions))} | {_cell(default)} | {_cell(prop.get('description', ''))} |"
        )
    return rows


def _section(key: str, prop: dict, definitions: dict) -> list[str]:
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        items = prop["items"]
        lines = [f"## `[[{key}]]`", "", _cell(prop.get("description", items.get("description", ""))), ""]
        variants = items.get("oneOf") or items.get("anyOf")
        if variants and all("properties" in v for v in variants):
            for v in variants:
                lines += [_variant_heading(key, v, variants), ""]
                if v.get("description", "") != prop.get("description"):  # not the section's words again
                    lines += [_cell(v.get("description", "")), ""]
                lines += _table(v["properties"], v.get("required", []), definitions) + [""]
        elif "properties" in items:
            lines += _table(items["properties"], items.get("required", []), definitions) + [""]
        return lines
    if prop.get("type") == "object" and "properties" in prop:
        return [
            f"## `[{key}]`",
            "",
            _cell(prop.get("description", "")),
            "",
            *_table(prop["properties"], prop.get("required", []), definitions),
            "",
        ]
    return []


def _variant_heading(key: str, variant: dict, variants: list[dict]) -> str:
    """A variant of an array's tables: by its ``kind``, else by the keys only it
    requires (a ``[[workload]]`` with ``replay`` is a recording's)."""
    kind = variant["properties"].get("kind", {}).get("const")
    if kind is not None:
        return f'### `kind = "{kind}"`'
    others = {k for v in variants if v is not variant for k in v.get("required", [])}
    own = [k for k in variant.get("required", []) if k not in others]
    if not own:
        return f"### `[[{key}]]`, form {variants.index(variant) + 1}"
    return f"### `[[{key}]]` with " + " and ".join(f"`{k}`" for k in own)


def scenario_page(design: str, schema: dict) -> str:
    definitions = schema.get("definitions", {})
    props = schema["properties"]
    top = {k: v for k, v in props.items() if v.get("type") not in ("object", "array")}
    lines = [
        f"# The {design} scenario file",
        "",
        _cell(schema.get("description", "")),
        "",
        f"Generated from `data/schemas/{design}.schema.json` (`fanoutsim schema {design}` prints it). "
        f"`fanoutsim example` lists the shipped scenarios of every design.",
        "",
        "## The top level",
        "",
        *_table(top, schema.get("required", []), definitions),
        "",
    ]
    for key, prop in props.items():
        lines += _section(key, prop, definitions)
    return "\n".join(lines).rstrip() + "\n"


# -- the checker's causes ---------------------------------------------------------------
def causes_page() -> str:
    from fanoutsim import designs

    lines = [
        "# The checker's causes",
        "",
        "Every duplicate and every loss a checker reports carries a cause, found from the run's trace "
        "and tables. `fanoutsim run` prints each cause it met with this sentence and whether the "
        "scenario's configuration expects it (it leaves the verdict valid).",
        "",
    ]
    for name in designs.names():
        design = designs.get(name)
        lines += [f"## {name}: {design.title}", ""]
        for kind, title in (("lost", "Losses"), ("duplicates", "Duplicates")):
            lines += [f"### {title}", "", "| cause | what happened |", "|---|---|"]
            for cause, text in design.causes.get(kind, {}).items():
                lines.append(f"| `{cause}` | {_cell(text)} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- the metrics ----------------------------------------------------------------------------
_METRIC_RUNS = {"reactor": ("crashes", 300.0), "outbox": ("outbox-crashes", 300.0), "leases": ("leases", 300.0)}


def metrics_page() -> str:
    from fanoutsim import designs, examples
    from fanoutsim.kernel.metrics import KERNEL_METRICS, LATENCY_BUCKETS, family_of, parse_series
    from fanoutsim.scenario import load_scenario

    lines = [
        "# Metrics",
        "",
        "Every runtime counts in the Prometheus style: `sim.metrics()` (and `rt.metrics()` on the wall "
        "clock) returns `{'name{label=\"value\"}': number}`, and `fanoutsim serve` serves the same names "
        "and values at `GET /metrics` in the Prometheus text format, without the write token, each family "
        "with the `# HELP` and `# TYPE` lines below. A counter only grows, also across a crash (a scraper "
        "would have kept it); a gauge is read from the tables when asked; a histogram shows as Prometheus "
        'writes one: a cumulative `<name>_bucket{le="..."}` per bound (seconds, from '
        f"{LATENCY_BUCKETS[0]:g} to {LATENCY_BUCKETS[-1]:g}, then "
        "`+Inf`), `<name>_count` and `<name>_sum`.",
        "",
        "The tables below list what each design counts, read from a short run of the scenario named; "
        "the meaning is the design's own (`Design.metrics`, in `designs/<design>/metrics.py`).",
        "",
    ]
    for design, (name, until) in _METRIC_RUNS.items():
        described = {**KERNEL_METRICS, **designs.get(design).metrics}
        sim = load_scenario(examples.path(name)).run(until=until)
        found: dict[str, tuple[str, set[str]]] = {}
        for key in sim.metrics():
            metric, labels = parse_series(key)
            family, kind = family_of(metric, described)
            found.setdefault(family, (kind, set()))[1].update(set(labels) - {"le"})
        lines += [
            f"## {design} (from `{name}`, {until:g} virtual seconds)",
            "",
            "| metric | kind | labels | what it measures |",
            "|---|---|---|---|",
        ]
        for metric in sorted(found):
            kind, labels = found[metric]
            shown = ", ".join(f"`{label}`" for label in sorted(labels)) or "-"
            meaning = _cell(described[metric].text) if metric in described else "(not described)"
            lines.append(f"| `{metric}` | {kind} | {shown} | {meaning} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- the Python API reference -------------------------------------------------------------
def api_page(sections: tuple[apiref.Section, ...]) -> str:
    """A reference page's entries: per section, each module's docstring, an entry per
    object whose home it holds, and a table linking the others it exports to theirs."""
    lines: list[str] = []
    for section in sections:
        lines += [f"## {section.title}", ""]
        for name in section.modules:
            lines += _module_part(name)
    return "\n".join(lines).rstrip() + "\n"


def _module_part(name: str) -> list[str]:
    here = [e for e in apiref.entries().values() if e.module == name and not inspect.ismodule(e.obj)]
    elsewhere = [(n, apiref.entry(name, n)) for n in apiref.public_names(name)]
    elsewhere = [(n, e) for n, e in elsewhere if e.module != name]
    rst = [f".. automodule:: {name}", ""]
    for e in here:
        rst += _entry(e) + [""]
    if elsewhere:
        rst += [
            f"``{name}`` also gives these, each documented with what defines it:",
            "",
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 30 70",
            "",
            "   * - name",
            "     - what it is",
        ]
        for n, e in elsewhere:
            rst += [f"   * - :py:obj:`{n} <{e.address}>`", f"     - {_summary(e)}"]
    return [f"### `{name}`", "", "```{eval-rst}", *rst, "```", ""]


def _summary(e: apiref.Entry) -> str:
    """The first sentence of what the entry says (a full stop inside ``code`` is no end)."""
    doc = " ".join(apiref.entry_doc(e).split("\n\n")[0].split())
    parts = doc.split("``")
    for i in range(0, len(parts), 2):  # the even parts are outside ``code``
        end = re.search(r"[.!?](\s|$)", parts[i])
        if end:
            return "``".join(parts[:i] + [parts[i][: end.start() + 1]])
    return doc


def _entry(e: apiref.Entry) -> list[str]:
    obj = e.obj
    if inspect.isclass(obj):
        directive = "autoexception" if issubclass(obj, BaseException) else "autoclass"
        if obj.__name__ != e.name:  # a second name: autodoc says "alias of"
            return [f".. {directive}:: {e.address}"]
        return [f".. {directive}:: {e.address}", *_members(obj, e.address)]
    if callable(obj):
        return [f".. autofunction:: {e.address}"]
    text = repr(obj)
    value = [f"   :value: {text}"] if len(text) <= 60 and "\n" not in text else []
    doc = apiref.data_doc(e.module, e.name)
    body = ("   " + line if line else "" for line in doc.splitlines())
    return [f".. py:data:: {e.name}", f"   :module: {e.module}", *value, "", *body]


def _members(cls: type, address: str) -> list[str]:
    """The options and text of a class's entry: its own members listed, and a line
    naming those it takes from a public base class, with links to their entries."""
    own, inherited = [], []
    for m in apiref.public_members(cls):
        where = apiref.member_address(cls, m)
        (own if where == f"{address}.{m}" else inherited).append(where)
    lines = [f"   :members: {', '.join(a.rpartition('.')[2] for a in own)}", "   :undoc-members:"] if own else []
    if inherited:
        links = ", ".join(f":py:obj:`~{a}`" for a in inherited)
        lines += ["", f"   Also has, from a base class: {links}."]
    keys = apiref.key_docs(cls)
    if keys:  # a scenario table: its keys as the scenario reference documents them
        lines += ["", "   Its fields, the table's keys:", ""]
        lines += [f"   * ``{name}``: {doc}" for name, doc in keys.items()]
    return lines


# -- the how-tos' sweeps ---------------------------------------------------------------------
class HowtoSweep(NamedTuple):
    """A how-to's sweep: the shipped scenario it starts from, the ``fanoutsim
    sweep`` arguments after the scenario's file, the figure it shows, and the
    file the reader writes the scenario to: each how-to's own, so that several
    followed in one folder do not collide (``example`` refuses to overwrite)."""

    example: str
    arguments: tuple[str, ...]
    figure: str
    scenario_file: str


HOWTO_SWEEPS = {
    "safety-poll": HowtoSweep(
        "safety-poll",
        (
            "--grid",
            "safety_poll_interval=0.5,1,1.5,3,6",
            "--grid",
            "faults.0.drop=0.05,0.5",
            "--seeds",
            "0-2",
            "--workers",
            "2",
            "--budget",
            "2",
            "--out",
            "out/safety-poll",
        ),
        "sweep_commit_to_handled_p99_s.png",
        "safety-poll.toml",
    ),
    "lease-length": HowtoSweep(
        "lease-length",
        (
            "--grid",
            "consumers.worker.lease_seconds=5,10,20,40",
            "--grid",
            "consumers.worker.duration.sigma=0.5,1",
            "--seeds",
            "0-2",
            "--workers",
            "2",
            "--until",
            "1200",
            "--budget",
            "0.01",
            "--out",
            "out/lease-length",
        ),
        "sweep_duplicates_per_delivered.png",
        "lease-length.toml",
    ),
}


def _command_lines(sweep: HowtoSweep) -> list[str]:
    """The commands as the reader types them: the example written out, then the
    sweep, broken before a flag (each with its value) where a line grows long."""
    args, parts = sweep.arguments, []
    i = 0
    while i < len(args):
        takes_value = args[i].startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--")
        parts.append(" ".join(args[i : i + 2]) if takes_value else args[i])
        i += 2 if takes_value else 1
    lines, line = [], f"fanoutsim sweep {sweep.scenario_file}"
    for part in parts:
        if len(line) + 1 + len(part) > 88:
            lines.append(f"{line} \\")
            line = f"    {part}"
        else:
            line = f"{line} {part}"
    return [f"fanoutsim example {sweep.example} --out {sweep.scenario_file}", *lines, line]


def _stamp(root: Path, sweep: HowtoSweep) -> str:
    """A hash of fanoutsim's code and of the command: what the output depends on."""
    import hashlib

    digest = hashlib.sha256(repr(sweep).encode())
    for path in sorted((root / "fanoutsim").rglob("*")):
        if path.suffix in (".py", ".toml", ".json") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def howto_sweep(out: Path, root: Path, name: str, sweep: HowtoSweep) -> None:
    """Write ``howto-<name>-command.md`` (the commands), ``-output.md`` (what
    the sweep printed, run in a fresh folder with exactly those commands) and
    ``howto-<name>.png`` (its figure); nothing runs when the stamp is the one
    the files were made with. A sweep that fails stops the build with its error."""
    import os
    import subprocess
    import sys
    import tempfile

    stamp, stamp_file = _stamp(root, sweep), out / f"howto-{name}.stamp"
    figure = out / f"howto-{name}.png"
    if stamp_file.exists() and stamp_file.read_text() == stamp and figure.exists():
        return
    env = {**os.environ, "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory() as tmp:
        from fanoutsim import examples

        examples.write(sweep.example, Path(tmp) / sweep.scenario_file)
        done = subprocess.run(  # no tty: no progress bar
            [sys.executable, "-m", "fanoutsim", "sweep", sweep.scenario_file, *sweep.arguments],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the {name} how-to's sweep failed: {done.stderr.strip()}")
        folder = sweep.arguments[sweep.arguments.index("--out") + 1]
        shutil.copyfile(Path(tmp) / folder / sweep.figure, figure)
    commands = "\n".join(_command_lines(sweep))
    _write(out / f"howto-{name}-command.md", f"```sh\n{commands}\n```\n")
    _write(out / f"howto-{name}-output.md", f"```text\n{done.stdout.rstrip()}\n```\n")
    _write(stamp_file, stamp)
