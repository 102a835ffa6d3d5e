"""scripts/get_eval_data.py lays out a WiC zip and an SCWS zip the way `ctxembed eval` reads them."""

from __future__ import annotations

import importlib.util
import zipfile

import pytest

from tests.cli_helpers import invoke, strict_json
from tests.conftest import FIXTURES, REPO

spec = importlib.util.spec_from_file_location("get_eval_data", REPO / "scripts" / "get_eval_data.py")
get_eval_data = importlib.util.module_from_spec(spec)
spec.loader.exec_module(get_eval_data)


def test_a_wic_zip_becomes_a_folder_eval_wic_reads(tmp_path):
    archive = tmp_path / "WiC_dataset.zip"
    with zipfile.ZipFile(archive, "w") as zf:  # the layout of the authors' zip: one folder per split
        for split in ("train", "dev"):
            for kind in ("data", "gold"):
                zf.write(FIXTURES / "wic" / f"{split}.{kind}.txt", f"{split}/{split}.{kind}.txt")
        zf.writestr("README.txt", "WiC")
    assert get_eval_data.main(["wic", str(archive), str(tmp_path / "wic")]) == 0
    assert sorted(p.name for p in (tmp_path / "wic").iterdir()) == [
        "dev.data.txt", "dev.gold.txt", "train.data.txt", "train.gold.txt",
    ]  # fmt: skip
    doc = strict_json(invoke("eval", "wic", tmp_path / "wic", "-c", "static", "--json").stdout)
    assert doc["schema"].startswith("ctxembed.eval")


def test_an_scws_zip_gives_ratings_and_a_fixed_dev_split(tmp_path):
    lines = (FIXTURES / "scws_tiny.txt").read_text(encoding="utf-8").splitlines()
    archive = tmp_path / "SCWS.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("SCWS/ratings.txt", "\n".join(lines) + "\n")
    out = tmp_path / "scws"
    assert get_eval_data.main(["scws", str(archive), str(out), "--dev", "2"]) == 0
    dev = (out / "dev.txt").read_text(encoding="utf-8").splitlines()
    test = (out / "test.txt").read_text(encoding="utf-8").splitlines()
    assert len(dev) == 2 and sorted(dev + test) == sorted(lines)
    assert get_eval_data.main(["scws", str(archive), str(tmp_path / "again"), "--dev", "2"]) == 0
    assert (tmp_path / "again" / "dev.txt").read_text(encoding="utf-8").splitlines() == dev  # seeded
    doc = strict_json(invoke("eval", "pairs", out / "ratings.txt", "-c", "static", "--json").stdout)
    assert doc["schema"].startswith("ctxembed.eval")


@pytest.mark.parametrize("dataset", ["wic", "scws"])
def test_a_wrong_file_is_one_line_and_exit_1(tmp_path, capsys, dataset):
    wrong = tmp_path / "notes.txt"
    wrong.write_text("not a data set\n")
    assert get_eval_data.main([dataset, str(wrong), str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.count("\n") == 1
