"""Write the JSON Schema of each design's scenario files into data/schemas/.

    python data/make_schemas.py            # writes data/schemas/<design>.schema.json
    python data/make_schemas.py --check    # exits 1 if a written file is out of date

The schemas come from the designs' declared scenario schemas
(:func:`fanoutsim.scenario.json_schema`); an editor with a TOML language server
uses them to complete and check scenario files, for instance with a first line
``#:schema ../schemas/outbox.schema.json`` (Taplo / Even Better TOML).
"""

from __future__ import annotations

import sys
from pathlib import Path

from fanoutsim import designs
from fanoutsim.scenario import json_schema_text, write_schemas

HERE = Path(__file__).resolve().parent / "schemas"


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        stale = [
            name
            for name in designs.names()
            if not (HERE / f"{name}.schema.json").is_file()
            or (HERE / f"{name}.schema.json").read_text(encoding="utf-8") != json_schema_text(name)
        ]
        for name in stale:
            print(f"{HERE / f'{name}.schema.json'} is out of date: run python data/make_schemas.py", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas(HERE):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
