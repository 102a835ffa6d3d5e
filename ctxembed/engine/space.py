"""The contextual neighbour space: each vocabulary word's mean contextual vector over a reference corpus.

A word's vector in a sentence lives where the model puts words *in context*; its input embedding does
not (every sentence's vector is pulled back to the same place by h0). So neighbours are searched among
type-level vectors distilled from contexts (Bommasani, Davis & Cardie 2020): for each word of the
neighbour vocabulary, the mean of its hidden states over its occurrences in a share of the Brown corpus
the project ships, one mean per hidden state h0 ... hL, so any read-out (a layer, the mean of the
layers, a --mix) is a mix of these means. A word met fewer than ``MIN_COUNT`` times gets its hidden
states from a neutral template sentence (:data:`TEMPLATE`) instead; the space says how many did.
This module builds the space and opens it; :mod:`ctxembed.engine.space_search` searches it.

    space = open_space(engine)                       # built once, then memory-mapped from the model's folder
    space.neighbours(hidden_states(result, row), mix, word="bank", k=10, exclude={"river"})

The space is a folder beside the model's files (:func:`space_folder`; the cache folder when the model's
folder cannot be written), named by the model, the space's version and what it was built from (the
model's weights, the corpus share), written beside its final name and renamed into place.
``space.json`` records the shapes and the CRC-32 of every array; a folder that does not match is
refused with one line naming the command that rebuilds it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ctxembed.engine.space_search import (  # noqa: F401 (word_forms: the space's callers import it here)
    NeighbourSpace,
    crc,
    rebuild_command,
    word_forms,
)
from ctxembed.errors import DataError

VERSION = 1  # the layout of a space folder; another version is built again, never read
TEMPLATE = "the word {word} ."  # the sentence a rare word's vectors come from
MIN_COUNT = 2  # occurrences in the corpus share below which a word's vectors come from the template
SHARE = 8  # every SHARE-th line of the corpus is read: 7,168 of Brown's 57,340 lines (docs/senses.md)
VOCABULARY = 20_000  # the most frequent words of the model's neighbour vocabulary that make the space
# A smaller space for a small machine (and the test suite): every Nth line, the N most frequent words
SHARE_VARIABLE, VOCABULARY_VARIABLE = "CTXEMBED_SPACE_SHARE", "CTXEMBED_SPACE_WORDS"


def _setting(variable: str, default: int) -> int:
    """A positive whole number from the environment, else ``default``."""
    value = os.environ.get(variable, "")
    return int(value) if value.isdigit() and int(value) > 0 else default


def share() -> int:
    return _setting(SHARE_VARIABLE, SHARE)


def vocabulary_size() -> int:
    return _setting(VOCABULARY_VARIABLE, VOCABULARY)


CHUNK_LINES = 256


# ------------------------------------------------------------------------------ building


def accumulate(
    engine,
    lines: Sequence[str],
    vocabulary: Sequence[str],
    *,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sums of each vocabulary word's hidden states over its occurrences in ``lines`` and the counts:
    ((K, V, D) float64, (V,) int64). Lines the engine cannot read (too long, no word) are skipped."""
    row_of = {w: i for i, w in enumerate(vocabulary)}
    sums = counts = None
    for start in range(0, len(lines), CHUNK_LINES):
        prepared = []
        for text in lines[start : start + CHUNK_LINES]:
            try:
                prepared.append(engine.prepare(text))
            except DataError:
                continue
        for result in engine.run(prepared, weights=False):
            hidden = hidden_states(result)  # (K, W, D)
            if sums is None:
                sums = np.zeros((hidden.shape[0], len(vocabulary), hidden.shape[2]))  # (K, V, D)
                counts = np.zeros(len(vocabulary), dtype=np.int64)  # (V,)
            keys = [result.prepared.token_keys[p].lower() for p in result.prepared.used]
            rows = np.array([row_of.get(key, -1) for key in keys])  # (W,)
            found = rows >= 0
            np.add.at(sums, (slice(None), rows[found]), hidden[:, found])  # (K, w, D) into (K, V, D)
            np.add.at(counts, rows[found], 1)
        if progress:
            progress(min(start + CHUNK_LINES, len(lines)))
    return sums, counts


def hidden_states(result, row: int | None = None) -> np.ndarray:
    """(K, W, D) the hidden states a space keeps of a result (:meth:`Contextualized.hidden_states`, h0 ... hL)
    in float64; (K, D) those of word ``row`` alone (the other words' are not copied)."""
    states = result.hidden_states()
    return np.stack(states if row is None else [state[row] for state in states]).astype(np.float64)


def template_states(engine, words: Sequence[str]) -> np.ndarray:
    """(K, n, D) each word's hidden states in the template sentence, run ``CHUNK_LINES`` words at a time (every
    result's hidden states at once held 0.7 GB for MiniLM's 13,156 rare words)."""
    out = []
    for start in range(0, len(words), CHUNK_LINES):
        chunk = words[start : start + CHUNK_LINES]
        prepared = [engine.prepare(TEMPLATE.format(word=w)) for w in chunk]
        for result, word in zip(engine.run(prepared, weights=False), chunk, strict=True):
            out.append(hidden_states(result, result.index_of(word)))  # (K, D)
    return np.stack(out, axis=1) if out else None


def build_space(
    engine, lines: Sequence[str], vocabulary: Sequence[str], *, progress=None
) -> tuple[np.ndarray, np.ndarray]:
    """(means (K, V, D) float16, counts (V,) int32): corpus means, template vectors for rare words."""
    sums, counts = accumulate(engine, lines, vocabulary, progress=progress)
    rare = np.flatnonzero(counts < MIN_COUNT)
    means = sums
    means /= np.maximum(counts, 1)[None, :, None]  # (K, V, D) in place: no second 0.4 GB array
    if rare.size:
        means[:, rare] = template_states(engine, [vocabulary[i] for i in rare])
        counts[rare] = 0
    return means.astype(np.float16), counts.astype(np.int32)


# ------------------------------------------------------------------------------ the folder


def space_folder(engine) -> Path:
    """Where ``engine``'s space lives, named by the model, the version and a key of what it is built from
    (the vocabulary's file, the engine's settings, the corpus share and the rules): beside the model's own
    files (its install folder), so that it is built once per install and every process, and every cache
    folder, reads the same one; in the cache folder when the model's folder cannot be written. The key
    names the vocabulary's file itself, the folder is the one the model was opened from: a folder of links
    to another model folder's files has the same key and a space of its own (the tests' view of the
    installed model takes what they write)."""
    import hashlib  # lazy: only a neighbour search opens a space

    from ctxembed.vectors.cache import cache_dir, file_fingerprint

    try:
        opened = Path(engine.store.path).absolute()
        source = file_fingerprint(opened.resolve())
    except (OSError, TypeError):
        opened, source = None, {"words": len(engine.store)}
    recipe = [source, engine.card.name, engine.card.family, share(), vocabulary_size(), MIN_COUNT, TEMPLATE]
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:12]
    name = f"space-{engine.model}-v{VERSION}-{key}"
    beside = opened.parent / name if opened is not None else None
    if beside is not None and (beside.exists() or os.access(opened.parent, os.W_OK)):
        return beside
    return cache_dir() / name


def open_space(engine, *, build: bool = True, on_note: Callable[[str], None] | None = None) -> NeighbourSpace:
    """``engine``'s contextual neighbour space: opened from its folder, or built there first (``build``;
    notes go to ``on_note``). A damaged folder is a DataError naming :func:`rebuild_command`."""
    folder = space_folder(engine)
    if not folder.exists():
        if not build:
            raise DataError(
                f"{engine.model}'s contextual neighbour space is not built: run `{rebuild_command(engine.model)}`"
            )
        build_folder(engine, folder, on_note=on_note)
    return read_folder(folder, rebuild_command(engine.model))


def read_folder(folder: Path, rebuild: str) -> NeighbourSpace:
    """The space in ``folder``; DataError in one line (naming ``rebuild``) when it does not match its record."""
    try:
        meta = json.loads((folder / "space.json").read_text())
        words = (folder / "words.txt").read_text(encoding="utf-8").split("\n")
        means = np.load(folder / "means.npy", mmap_mode="r", allow_pickle=False)
        counts = np.load(folder / "counts.npy", allow_pickle=False)
        problem = None
        if meta.get("version") != VERSION:
            problem = f"version {meta.get('version')}, not {VERSION}"
        elif means.dtype != np.float16 or means.shape != tuple(meta["shape"]) or len(words) != means.shape[1]:
            problem = f"means {means.dtype} {means.shape} for {len(words)} words"
        elif counts.shape != (len(words),) or crc(counts) != meta["counts_crc"] or "means_crc" not in meta:
            problem = "counts do not match their checksum"
        elif words_crc(words) != meta["words_crc"]:
            problem = "words do not match their checksum"
    except (OSError, ValueError, KeyError, TypeError, EOFError) as error:
        problem = str(error).splitlines()[0] if str(error) else type(error).__name__
    if problem is not None:
        raise DataError(f"{folder} is damaged ({problem}): rebuild it with `{rebuild}`")
    return NeighbourSpace(folder, words, means, counts.astype(np.int32), meta)


def space_vocabulary(engine) -> list[str]:
    """The words a space is built for: the ``VOCABULARY`` most frequent of the engine's neighbour
    vocabulary that the tokenizer reads as one word of their own."""
    from ctxembed.vectors.tokenize import tokenize

    words = []
    for word in engine.store.words[: vocabulary_size()]:
        tokens = tokenize(word)
        if len(tokens) == 1 and tokens[0].key == word:
            words.append(word)
    return words


def corpus_share() -> list[str]:
    """Every ``SHARE``-th line of the shipped Brown corpus (a share across its genres, in order)."""
    import gzip

    from ctxembed.vectors.shipped import shipped_path

    every = share()
    with gzip.open(shipped_path("brown.txt.gz"), "rt", encoding="utf-8") as fh:
        return [line.strip() for number, line in enumerate(fh) if number % every == 0 and line.strip()]


def build_folder(engine, folder: Path, *, on_note: Callable[[str], None] | None = None) -> dict:
    """Build ``engine``'s space into ``folder`` (written beside it, renamed into place); its record."""
    from ctxembed.output import say

    note = on_note or say
    lines = corpus_share()
    vocabulary = space_vocabulary(engine)
    note(f"ctxembed: building {engine.model}'s contextual neighbour space from {len(lines):,} Brown sentences "
         f"and {len(vocabulary):,} words (once; it is kept in {folder.parent})")  # fmt: skip
    started, cpu = time.perf_counter(), time.process_time()
    means, counts = build_space(engine, lines, vocabulary)
    record = {
        "version": VERSION,
        "model": engine.model,
        "corpus": "data/brown.txt.gz",
        "share": share(),
        "lines": len(lines),
        "template": TEMPLATE,
        "min_count": MIN_COUNT,
        "templated": int((counts == 0).sum()),
        "shape": list(means.shape),
        "counts_crc": crc(counts),
        "means_crc": crc(means),
        "words_crc": words_crc(vocabulary),
        "build_seconds": round(time.perf_counter() - started, 1),
        "build_cpu_seconds": round(time.process_time() - cpu, 1),
        "build_peak_mb": _peak_mb(),  # the building process's peak resident memory, the model's weights in it
    }
    temporary = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        np.save(temporary / "means.npy", means, allow_pickle=False)
        np.save(temporary / "counts.npy", counts, allow_pickle=False)
        (temporary / "words.txt").write_text("\n".join(vocabulary), encoding="utf-8")
        (temporary / "space.json").write_text(json.dumps(record, indent=1))
        try:
            os.replace(temporary, folder)
        except OSError:
            if not folder.exists():  # another process built it meanwhile otherwise: theirs is kept
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    record["bytes"] = sum(f.stat().st_size for f in folder.iterdir())
    return record


def words_crc(words: Sequence[str]) -> str:
    """The CRC-32 of a space's words as its words.txt holds them (one a line), as 8 hex digits."""
    return f"{zlib.crc32(chr(10).join(words).encode()):08x}"


def _peak_mb() -> int | None:
    """This process's peak resident memory so far, in MB (None where the platform does not say)."""
    try:
        import resource  # POSIX only; lazy: only a build reads it
    except ImportError:
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # Linux: kilobytes


def space_document(model: str, *, rebuild: bool = False, on_note: Callable[[str], None] | None = None) -> dict:
    """`ctxembed models space MODEL`: build ``model``'s contextual neighbour space when it is missing (or
    again with ``rebuild``) and say what it holds, where, its size and how long it took to build."""
    from ctxembed.engine.registry import open_engine

    engine = open_engine(model=model)
    if "contextual" not in engine.card.spaces:
        raise DataError(
            f"model {engine.card.name} has no contextual neighbour space (it searches {engine.card.spaces[0]})"
        )
    folder = space_folder(engine)
    if rebuild:
        shutil.rmtree(folder, ignore_errors=True)
    space = open_space(engine, on_note=on_note)
    return {
        "schema": "ctxembed.space/1",
        "model": engine.card.name,
        "folder": str(folder),
        "bytes": sum(f.stat().st_size for f in folder.iterdir()),
        **{
            key: space.meta[key]
            for key in (
                "corpus",
                "share",
                "lines",
                "template",
                "min_count",
                "templated",
                "shape",
                "build_seconds",
                "build_cpu_seconds",
            )
        },  # fmt: skip
        "build_peak_mb": space.meta.get("build_peak_mb"),  # None: built by a ctxembed that did not record it
        "words": len(space.words),
    }
