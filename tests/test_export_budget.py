"""Every export has a size budget (docs/robustness.md): past it the view degrades in a documented way
instead of growing without bound. Time and memory at 512 and 2,048 tokens are measured by make bench."""

from __future__ import annotations

import json
import random
import re
import xml.etree.ElementTree as ET

import numpy as np

from ctxembed.views import export
from ctxembed.views.svg import DETAILED_CELLS, png_bytes
from tests.cli_helpers import invoke

WORDS = "the river bank money water we sat on and paid into a of to in is was for that with".split()


def _sentence(tokens: int) -> str:
    rng = random.Random(0)
    return " ".join(rng.choice(WORDS) for _ in range(tokens))


def test_a_512_token_svg_stays_under_10_mb_and_well_formed(tmp_path):
    svg = tmp_path / "long.svg"
    result = invoke("attend", "-", "--save", svg, input=_sentence(512))
    assert result.exit_code == 0, result.stderr
    assert svg.stat().st_size < 10_000_000  # 91 MB before the budget
    root = ET.fromstring(svg.read_bytes())
    images = [el for el in root.iter() if el.tag.endswith("image")]
    assert len(images) == 1 and images[0].get("href").startswith("data:image/png;base64,")
    assert not [el for el in root.iter() if el.get("class") == "cell"]  # no per-cell detail past the budget
    assert "drawn without per-cell values" in svg.read_text(encoding="utf-8")


def test_a_small_heatmap_keeps_its_per_cell_detail(tmp_path):
    svg = tmp_path / "short.svg"
    assert invoke("attend", "we sat on the river bank", "--save", svg).exit_code == 0
    root = ET.fromstring(svg.read_bytes())
    cells = [el for el in root.iter() if el.get("class") == "cell"]
    assert len(cells) == 36 and not [el for el in root.iter() if el.tag.endswith("image")]
    assert 36 <= DETAILED_CELLS


def test_a_page_past_its_weight_budget_is_the_figure_without_the_weights(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "PAGE_WEIGHTS", 100)  # 6 tokens x 4 heads x 2 layers = 288 weights
    page = tmp_path / "page.html"
    assert invoke("attend", "we sat on the river bank", "--heads", "4", "--layers", "2", "--save", page).exit_code == 0
    html = page.read_text(encoding="utf-8")
    data = json.loads(re.search(r'class="ctxembed-data">(.*?)</script>', html, re.S)[1])
    assert "weights" not in data and "more than 100 attention weights" in data["weights_dropped"]
    assert '<div class="app">' not in html and "<svg" in html
    monkeypatch.setattr(export, "PAGE_WEIGHTS", 1 << 20)
    assert invoke("attend", "we sat on the river bank", "--save", page).exit_code == 0
    assert '<div class="app">' in page.read_text(encoding="utf-8")  # under the budget: the interactive view


def test_png_bytes_is_a_readable_png():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10
    data = png_bytes(rgb)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with matplotlib, the optional plot extra
        return
    import io

    assert np.array_equal(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), rgb)
