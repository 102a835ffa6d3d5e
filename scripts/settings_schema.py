"""Rewrite the ``settings`` definition of docs/schemas/common.schema.json from the setting declarations.

Run after adding or changing a setting: ``.venv/bin/python scripts/settings_schema.py``;
tests/test_json_schema.py fails while the file and the declarations disagree.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxembed.settings import settings_schema

COMMON = Path(__file__).resolve().parent.parent / "docs" / "schemas" / "common.schema.json"


def main() -> None:
    schema = json.loads(COMMON.read_text())
    schema["$defs" if "$defs" in schema else "definitions"]["settings"] = settings_schema()
    COMMON.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote the settings definition of {COMMON}")


if __name__ == "__main__":
    main()
