"""The contextual neighbour space: each vocabulary word's mean contextual vector over a reference corpus.

A word's vector in a sentence lives where the model puts words *in context*; its input embedding does
not (every sentence's vector is pulled back to the same place by h0). So neighbours are searched among
type-level vectors distilled from contexts (Bommasani, Davis & Cardie 2020): for each word of the
neighbour vocabulary, the mean of its hidden states over its occurrences in a share of the Brown corpus
the project ships, one mean per hidden state h0 ... hL, so any read-out (a layer, the mean of the
layers, a --mix) is a mix of these means. A word met fewer than ``MIN_COUNT`` times gets its hidden
states from a neutral template sentence (:data:`TEMPLATE`) instead; the space says how many did.

    space = open_space(engine)                       # built once, then memory-mapped from the model's folder
    space.nearest(result.contextual[row], mix, k=10, exclude={"bank", "river"})

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.core.mix import LayerMix
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
# top principal directions removed from the space and the query (all-but-the-top); 3 did no
# better on data/ambiguous.tsv (docs/senses.md)
COMPONENTS = 0
PCA_ROWS = 5_000  # the most frequent words the directions are computed from

# how much of the word's own type direction a query loses: 0.5, 0.6, 0.7 follow the sense for 9, 12
# and 14 of the 20 words of data/ambiguous.tsv (docs/senses.md)
OWN = 0.7


@dataclass
class NeighbourSpace:
    """A built space: ``words`` (V,), ``means`` (K, V, D) float16, one per hidden state, ``counts`` (V,)
    the occurrences each mean is over (0: from the template)."""

    folder: Path
    words: list[str]
    means: np.ndarray  # (K, V, D) float16, memory-mapped
    counts: np.ndarray  # (V,) int32
    meta: dict

    def __post_init__(self):
        self.row_of = {w: i for i, w in enumerate(self.words)}
        self._readouts: dict[str, Readout] = {}

    @property
    def templated(self) -> int:
        """How many words have their vectors from the template sentence."""
        return int((self.counts == 0).sum())

    @property
    def templated_words(self) -> set[str]:
        """The words whose vectors come from the template sentence."""
        return {self.words[i] for i in np.flatnonzero(self.counts == 0)}

    def describe(self, readout: str) -> dict:
        """The JSON record of the space a list was searched in."""
        return {
            "kind": "contextual",
            "about": f"each word's mean contextual vector ({readout}) over {self.meta['lines']:,} Brown "
            f"sentences; {self.templated:,} rare words from the template {TEMPLATE!r}",
            "words": len(self.words),
            "corpus": self.meta["corpus"],
            "lines": self.meta["lines"],
            "templated": self.templated,
            "readout": readout,
            "version": VERSION,
        }

    def readout(self, mix: LayerMix) -> Readout:
        """The space read out by ``mix``: built once per read-out (centred, its top principal directions
        removed, rows at unit length), kept beside the means and memory-mapped after."""
        key = mix_key(mix)
        if key not in self._readouts:
            V, D = len(self.words), self.means.shape[2]

            def build() -> np.ndarray:
                self._check_means()  # read whole now anyway: a damaged byte is refused, never searched
                return _readout(mix.apply(self.means.astype(np.float32)))

            packed = _mapped(self.folder / f"readout-{key}", (V + 1 + COMPONENTS, D), build)
            self._readouts[key] = Readout(packed[:V], packed[V], packed[V + 1 :])
        return self._readouts[key]

    def _check_means(self) -> None:
        """Before a read-out is built from the means (read whole then anyway): their checksum, or a DataError
        naming the rebuild command."""
        if _crc(self.means) != self.meta["means_crc"]:
            raise DataError(
                f"{self.folder} is damaged (its means do not match their checksum): rebuild it with "
                f"`{rebuild_command(self.meta['model'])}`"
            )

    def nearest(
        self,
        vector: np.ndarray,
        mix: LayerMix,
        *,
        word: str | None,
        k: int,
        exclude: set[str],
        direction: bool = False,
    ) -> list[tuple[str, float]]:
        """The ``k`` words whose read-out is most cosine-similar to ``vector`` (D,), the read-out of
        ``word`` in a sentence, best first, skipping ``exclude``. The query goes through the read-out's
        centring and removal, and loses ``OWN`` of the word's own type direction: what the sentence
        makes of the word, rather than the word itself (whose type vector sits near every sentence's).
        ``direction``: ``vector`` is a difference of read-outs (a sense's centre minus the others'), used
        as it is."""
        space = self.readout(mix)
        query = np.asarray(vector, dtype=np.float64)  # (D,)
        if not direction:
            query = space.remove(query[None])[0]  # (D,)
        query = _unit(query[None])[0]
        row = None if word is None else self.row_of.get(word)
        if row is not None:
            query = query - OWN * space.units[row]  # (D,)
        scores = space.units @ _unit(query[None])[0].astype(np.float32)  # (V, D) @ (D,) -> (V,)
        banned = [self.row_of[w] for w in exclude if w in self.row_of]
        scores[banned] = -np.inf
        k = max(0, min(k, len(scores) - len(banned)))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]  # unordered top k
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.words[int(i)], float(scores[i])) for i in top]


@dataclass
class Readout:
    """A space under one read-out: ``units`` (V, D) the words at unit length after ``remove``."""

    units: np.ndarray  # (V, D) float32
    centre: np.ndarray  # (D,) the mean word
    top: np.ndarray  # (c, D) the top principal directions of the centred words, removed

    def remove(self, vectors: np.ndarray) -> np.ndarray:
        """(n, D) -> (n, D): centred, the top directions projected out (all-but-the-top)."""
        centred = vectors - self.centre  # (n, D)
        return centred - (centred @ self.top.T) @ self.top  # (n, D) - (n, c) @ (c, D)


def _readout(vectors: np.ndarray) -> np.ndarray:
    """(V + 1 + c, D): the words' unit rows after all-but-the-top, then the centre, then the c directions."""
    vectors = vectors.astype(np.float64)  # (V, D)
    centre = vectors.mean(axis=0)  # (D,)
    _, _, directions = np.linalg.svd(vectors[:PCA_ROWS] - centre, full_matrices=False)  # (D, D)
    top = directions[:COMPONENTS]  # (c, D)
    readout = Readout(np.empty(0), centre, top)
    return np.concatenate([_unit(readout.remove(vectors)), centre[None], top]).astype(np.float32)


def readout_name(mix: LayerMix) -> str:
    """A read-out as a person reads it: "mean of h0..h6" for equal weights, else its formula (1·h3)."""
    weights = np.asarray(mix.weights)
    if np.allclose(weights, weights[0]) and not mix.normalize:
        return f"mean of h0..h{len(weights) - 1}"
    return mix.formula()


def mix_key(mix: LayerMix) -> str:
    """A short name for a read-out's weights (the unit rows' file)."""
    data = np.ascontiguousarray(mix.weights, dtype=np.float64).tobytes() + bytes([mix.normalize, COMPONENTS])
    data += PCA_ROWS.to_bytes(4, "little")
    return f"{zlib.crc32(data):08x}"


def _unit(vectors: np.ndarray) -> np.ndarray:
    """(V, D) rows at unit length, float32 (a zero row stays zero)."""
    lengths = np.linalg.norm(vectors, axis=1, keepdims=True)  # (V, 1)
    return np.divide(vectors, lengths, out=np.zeros_like(vectors), where=lengths > 0).astype(np.float32)


def _crc(array: np.ndarray) -> str:
    return f"{zlib.crc32(memoryview(np.ascontiguousarray(array)).cast('B')) if array.size else 0:08x}"


def _mapped(base: Path, shape: tuple[int, ...], build: Callable[[], np.ndarray]) -> np.ndarray:
    """A float32 array kept as ``<base>-<crc>.npy``: mapped when a file with a matching CRC is there,
    else built and written (best effort: a folder that cannot be written gives the array in memory)."""
    for found in sorted(base.parent.glob(f"{base.name}-*.npy")):
        try:
            array = np.load(found, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError):
            continue
        if array.shape == shape and array.dtype == np.float32 and _crc(array) == found.stem.rsplit("-", 1)[-1]:
            return array
    array = np.ascontiguousarray(build(), dtype=np.float32)
    try:
        _save_atomic(base.parent / f"{base.name}-{_crc(array)}.npy", array)
    except OSError:
        pass
    return array


def _save_atomic(path: Path, array: np.ndarray) -> None:
    from ctxembed.output import atomic_file

    with atomic_file(path) as fh:
        np.save(fh, array, allow_pickle=False)


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


def hidden_states(result) -> np.ndarray:
    """(K, W, D) the hidden states a space keeps of a result: every layer's input and the top (h0 ... hL)."""
    return np.stack([*result.layer_inputs, result.top]).astype(np.float64)


def template_states(engine, words: Sequence[str]) -> np.ndarray:
    """(K, n, D) each word's hidden states in the template sentence."""
    prepared = [engine.prepare(TEMPLATE.format(word=w)) for w in words]
    out = []
    for result, word in zip(engine.run(prepared, weights=False), words, strict=True):
        out.append(hidden_states(result)[:, result.index_of(word)])  # (K, D)
    return np.stack(out, axis=1) if out else None


def build_space(
    engine, lines: Sequence[str], vocabulary: Sequence[str], *, progress=None
) -> tuple[np.ndarray, np.ndarray]:
    """(means (K, V, D) float16, counts (V,) int32): corpus means, template vectors for rare words."""
    sums, counts = accumulate(engine, lines, vocabulary, progress=progress)
    rare = np.flatnonzero(counts < MIN_COUNT)
    means = sums / np.maximum(counts, 1)[None, :, None]  # (K, V, D)
    if rare.size:
        means[:, rare] = template_states(engine, [vocabulary[i] for i in rare])
        counts[rare] = 0
    return means.astype(np.float16), counts.astype(np.int32)


# ------------------------------------------------------------------------------ the folder


def space_folder(engine) -> Path:
    """Where ``engine``'s space lives, named by the model, the version and a key of what it is built from
    (the vocabulary's file, the engine's settings, the corpus share and the rules): beside the model's own
    files (its install folder), so that it is built once per install and every process, and every cache
    folder, reads the same one; in the cache folder when the model's folder cannot be written."""
    import hashlib  # lazy: only a neighbour search opens a space

    from ctxembed.vectors.cache import cache_dir, file_fingerprint

    try:
        path = Path(engine.store.path).resolve()
        source = file_fingerprint(path)
    except (OSError, TypeError):
        path, source = None, {"words": len(engine.store)}
    recipe = [source, engine.card.name, engine.card.family, share(), vocabulary_size(), MIN_COUNT, TEMPLATE]
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:12]
    name = f"space-{engine.model}-v{VERSION}-{key}"
    beside = path.parent / name if path is not None else None
    if beside is not None and (beside.exists() or os.access(path.parent, os.W_OK)):
        return beside
    return cache_dir() / name


def rebuild_command(model: str) -> str:
    """The command that builds the space of the model named ``model`` again."""
    return f"ctxembed models space {model} --rebuild"


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
        elif counts.shape != (len(words),) or _crc(counts) != meta["counts_crc"] or "means_crc" not in meta:
            problem = "counts do not match their checksum"
        elif f"{zlib.crc32(chr(10).join(words).encode()):08x}" != meta["words_crc"]:
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
        "counts_crc": _crc(counts),
        "means_crc": _crc(means),
        "words_crc": f"{zlib.crc32(chr(10).join(vocabulary).encode()):08x}",
        "build_seconds": round(time.perf_counter() - started, 1),
        "build_cpu_seconds": round(time.process_time() - cpu, 1),
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


_SUFFIXES = ("", "s", "es", "ed", "d", "ing", "ings", "er", "ers", "ly", "'s")


def word_forms(word: str, words: Sequence[str]) -> list[str]:
    """The forms of ``word`` among ``words`` (bank: banks, banked, banking, banker, bankers), which sit
    near every sentence's ``word`` and say nothing of its sense: ``word`` plus a suffix, with its last
    consonant doubled (planned) or its final e or y changed (saving, berries)."""
    stems = {word, word + word[-1]} if word else set()
    if word.endswith("e"):
        stems.add(word[:-1])
    found = []
    for other in words:
        if other != word and any(other.startswith(s) and other[len(s) :] in _SUFFIXES for s in stems):
            found.append(other)
        elif word.endswith("y") and other.startswith(word[:-1]) and other[len(word) - 1 :] in ("ies", "ied"):
            found.append(other)
    return found


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
        "words": len(space.words),
    }
