"""The BERT family's installed folder: its converter, the files it writes, its checked loader.

    >>> FILES
    ('encoder.safetensors', 'vocab.txt', 'config.json', 'words.ctxv')

:data:`ctxembed.vectors.layouts.LAYOUTS` names these parts for the family ``bert``: ``models install``
converts with :func:`convert_bert`, installed.json pins :data:`FILES`, and the engine and ``models
verify`` open the folder with :func:`load_bert`. Opening checks, besides every family's cheap checks
(:func:`ctxembed.vectors.integrity.open_checked`):

- ``config.json`` holds the pinned upstream values (heads, layers, widths, epsilon, ...);
- the safetensors header is the one the converter writes for that config: every name, shape and dtype,
  the offsets laid end to end in name order, its metadata, and nothing after the last tensor;
- ``vocab.txt`` gives one id to each row of the word embeddings, no more;
- the arrays every sentence uses whole are finite (:func:`check_used_finite`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ctxembed.vectors.models import NEIGHBOURS, ModelPackage, damaged, parse_json, read_small

WEIGHTS = "encoder.safetensors"  # the converted weights: the encoder's own arrays (EncoderWeights.arrays)
FILES = (WEIGHTS, "vocab.txt", "config.json", NEIGHBOURS)  # what the converter writes and installed.json pins


# ------------------------------------------------------------------ installing


def convert_bert(package: ModelPackage, upstream: Path, into: Path) -> tuple[str, ...]:
    """The BERT family's conversion: the encoder's arrays in its own layout, float32, names sorted (the same
    upstream bytes give the same file), its vocabulary and config, and its neighbour store; the names of the
    files written (install hashes them, checking the weights finite on the same read)."""
    from ctxembed.core.encoder import EncoderConfig, EncoderWeights  # lazy: only installing converts (numpy behind it)
    from ctxembed.vectors import safetensors
    from ctxembed.vectors.integrity import expected_metadata

    config = EncoderConfig.from_json(json.loads((upstream / "config.json").read_text()))  # refuse before writing
    weights = EncoderWeights.from_tensors(config, safetensors.load(upstream / "model.safetensors"))  # float32
    safetensors.save(weights.arrays(), into / WEIGHTS, expected_metadata(package))
    shutil.copyfile(upstream / "vocab.txt", into / "vocab.txt")
    shutil.copyfile(upstream / "config.json", into / "config.json")
    about = f"{package.upstream.rpartition('/')[2]} input embeddings"  # its own name, whichever model
    _write_neighbours(weights.word, upstream / "vocab.txt", into / NEIGHBOURS, about)
    return FILES


def _write_neighbours(embeddings, vocab_file: Path, path: Path, about: str) -> None:
    """The neighbour search space: the model's input embedding of every whole word of its vocabulary
    (letters only, no ## piece), most frequent first by the shipped GloVe's ranks (the rest after, in
    vocabulary order). Measured against running each word through the encoder (docs/models.md): the
    same finance words for the money "bank", at no encoding cost."""
    from ctxembed.vectors.sources import open_vectors
    from ctxembed.vectors.store import write_store

    vocab = vocab_file.read_text(encoding="utf-8").splitlines()
    whole = [(word, row) for row, word in enumerate(vocab) if word.isalpha()]
    ranks = open_vectors(None).index
    whole.sort(key=lambda item: (ranks.get(item[0], len(ranks)), item[1]))
    words = [word for word, _ in whole]
    write_store(path, words, embeddings[[row for _, row in whole]], meta={"name": about})


# ------------------------------------------------------------------ opening


def load_bert(folder: Path):
    """A converted BERT folder (the model named by its folder's name) as (EncoderConfig, EncoderWeights over
    a memory map, WordPiece), after the cheap checks, and the full one for a file that changed since it was
    last checked. DataError: one line naming the damaged file and the install command."""
    from ctxembed.vectors.integrity import open_checked  # lazy: a start that opens no trained model checks none

    name = folder.name
    _, package, stats = open_checked(folder, FILES, WEIGHTS)
    config = check_config(name, folder / "config.json", package)
    weights = check_weights(name, folder / WEIGHTS, package, config, stats[WEIGHTS].st_size)
    check_used_finite(name, folder / WEIGHTS, weights)
    return config, weights, check_vocab(name, folder / "vocab.txt", config)


def check_config(name: str, path: Path, package: ModelPackage):
    """The config, refused unless every pinned upstream value is there as pinned."""
    from ctxembed.core.encoder import EncoderConfig  # lazy: `models list` needs no numpy

    config = parse_json(name, path, read_small(name, path))
    if not isinstance(config, dict):
        raise damaged(name, path, f"a JSON {type(config).__name__}, not an object")
    for key, pinned in package.config.items():
        value = config.get(key)
        if type(value) is not type(pinned) or value != pinned:
            raise damaged(name, path, f"{key} is {value!r}, the model's is {pinned!r}")
    try:
        return EncoderConfig.from_json(config)
    except (ValueError, TypeError, KeyError, ZeroDivisionError) as error:
        raise damaged(name, path, str(error) or type(error).__name__) from None


def check_weights(name: str, path: Path, package: ModelPackage, config, size: int):
    """The encoder's weights over a memory map, refused unless the header is the converter's: float32
    tensors in name order, laid end to end from 0 to the file's end, the config's names and shapes."""
    from ctxembed.core.encoder import EncoderWeights
    from ctxembed.vectors import safetensors
    from ctxembed.vectors.integrity import expected_metadata

    try:
        header, start = safetensors.read_header(path)
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    if header.get("__metadata__") != expected_metadata(package):
        raise damaged(name, path, "not written by ctxembed's converter")
    names = sorted(n for n in header if n != "__metadata__")
    end = 0
    for tensor in names:
        info = header[tensor]
        if info["dtype"] != "F32" or info["data_offsets"][0] != end:
            raise damaged(name, path, f"tensor {tensor} is not where the converter put it")
        end = info["data_offsets"][1]
    if start + end != size:
        raise damaged(name, path, f"{size - start - end:+,} bytes after its tensors")
    try:
        weights = EncoderWeights.from_arrays(config, safetensors.mapped(path, header, start))
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    extra = set(names) - set(weights.arrays())
    if extra:
        raise damaged(name, path, f"tensor {min(extra)} is not the model's")
    return weights


def check_vocab(name: str, path: Path, config):
    """The WordPiece vocabulary, refused unless it gives one id to each row of the word embeddings."""
    from ctxembed.vectors.wordpiece import WordPiece

    try:
        vocab = WordPiece.from_file(path)
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    if len(vocab.vocab) != config.vocab_size or max(vocab.vocab.values()) != config.vocab_size - 1:
        raise damaged(name, path, f"{len(vocab.vocab):,} pieces for {config.vocab_size:,} embeddings")
    return vocab


def check_used_finite(name: str, path: Path, weights) -> None:
    """Refuse a NaN or an infinity in the arrays every sentence uses whole (each layer's, the positions',
    the last LayerNorm's: all but the word embeddings, of which a sentence reads a few rows, checked in
    the hidden states they give), as install and verify check every number (``safetensors.all_finite``:
    one pass over pages the first sentence reads anyway)."""
    from ctxembed.vectors.safetensors import all_finite

    for tensor, array in weights.arrays().items():
        if tensor != "word" and not all_finite(array):
            raise damaged(name, path, f"tensor {tensor} holds a non-finite number")


def load_encoder(folder: Path):
    """The encoder of a model's folder, as (EncoderConfig, EncoderWeights) over a memory map of its
    converted weights, without the checks of :func:`load_bert` (which the engine opens a model with): for
    tools given a folder. ValueError or OSError when damaged."""
    from ctxembed.core.encoder import EncoderConfig, EncoderWeights  # lazy: `models list` needs no numpy
    from ctxembed.vectors import safetensors

    config = EncoderConfig.from_json(json.loads((folder / "config.json").read_text()))
    return config, EncoderWeights.from_arrays(config, safetensors.load(folder / WEIGHTS))
