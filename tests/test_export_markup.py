"""Text holding characters XML forbids (C0 controls, U+FFFE, U+FFFF) still gives a well-formed SVG and
an HTML page without forbidden code points, for every command that saves pictures."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from tests.cli_helpers import invoke

HOSTILE = "the river\x01 bank\x08 \x0b\x0cwater \x1b[31m money\ufffe \uffffloan \x7f\x85 bank"


def _forbidden_in_html(text: str) -> list[str]:
    """Code points the HTML5 parser reports as errors (control-character-in-input-stream,
    noncharacter-in-input-stream, surrogate-in-input-stream), checked one by one."""
    bad = []
    for ch in text:
        cp = ord(ch)
        control = (cp < 0x20 and ch not in "\t\n\x0c\r") or 0x7F <= cp <= 0x9F
        noncharacter = 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE
        if control or noncharacter or 0xD800 <= cp <= 0xDFFF:
            bad.append(f"U+{cp:04X}")
    return bad


@pytest.mark.parametrize(
    "command",
    [
        ("attend", HOSTILE),
        ("compare", HOSTILE, "the bank\x01 of the river", "--word", "bank"),
        ("neighbors", HOSTILE, "--word", "bank"),
    ],
    ids=["attend", "compare", "neighbors"],
)
def test_control_characters_give_well_formed_svg_and_valid_html(tmp_path, command):
    svg, page = tmp_path / "out.svg", tmp_path / "out.html"
    result = invoke(*command, "--save", svg, "--save", page)
    assert result.exit_code == 0, result.stderr
    root = ET.fromstring(svg.read_bytes())  # raises ParseError on a forbidden character
    assert root.tag.endswith("svg") and any(el.tag.endswith("text") for el in root.iter())
    html = page.read_text(encoding="utf-8")
    assert _forbidden_in_html(html) == []
    # the page's data keeps what the tokens held, as JSON escapes
    data = re.search(r'<script type="application/json" class="ctxembed-data">(.*?)</script>', html, re.S)[1]
    assert isinstance(json.loads(data), dict)
