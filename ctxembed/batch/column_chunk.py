"""One chunk of batch input lines -> its columns (:class:`ChunkColumns`), straight from the group arrays.

The columnar formats (:mod:`ctxembed.batch.columnar`) want a chunk as flat columns: one float32 buffer
of every line's weights with its offsets, one list of every token, and so on. :func:`chunk_columns`
builds them from :func:`ctxembed.batch.columns.prepare_many` and the groups of
:func:`ctxembed.batch.columns.arrays`, copying each group's arrays (B sentences at once) to their
lines' places in input order: no record dict and no array per line. The numbers are the ones the JSON
records spell (the same groups, and ``--digits`` rounds them the same way, see
:func:`ctxembed.batch.records.rounded`); tests/test_batch_columnar.py reads the files back against the JSON lines.

:func:`from_records` makes the same columns from record dicts: the path of an engine without the
column machinery (a trained model), of a chunk redone line by line after a failure, and of a lost
chunk's error records.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import orjson

from ctxembed.batch import columns
from ctxembed.batch.records import asked_groups, collector_paused, cropped, one_blas_thread, parse_chunk, rounded
from ctxembed.vectors.lexicon import TOKEN_SOURCES, TokenTable, offsets, source_codes


@dataclass(kw_only=True)
class ChunkColumns:
    """A chunk's output, a row per input line in order; list columns are flat, rows one after another.

    A row is *filled* when it is a result (its list columns are set), else null there (an error row)."""

    line: np.ndarray  # (n,) int64
    id: list  # (n,) the line's JSON id as JSON text, or None
    text: list  # (n,) str, None where not filled
    error: list  # (n,) str or None
    filled: np.ndarray  # (n,) bool
    token_counts: np.ndarray  # (n,) int64 tokens of each row, 0 where not filled
    # the tokens as written, (sum token_counts,): ``tokens``, or ``table.text[pieces]`` when ``pieces``
    # is given (every sentence of the chunk on the fast path); both None: not built (npz)
    tokens: list[str] | None
    pieces: np.ndarray | None  # (sum token_counts,) int64 piece ids of ``table``
    table: TokenTable | None = field(repr=False)
    sources: np.ndarray | None  # (sum token_counts,) int8 where each token's vector came from: TOKEN_SOURCES
    in_vocab: np.ndarray | None  # (sum token_counts,) bool
    attended_counts: np.ndarray  # (n,) int64 attended tokens T of each row, 0 where not filled
    attended: np.ndarray | None  # (sum attended_counts,) int32 positions of the attended tokens
    weights: np.ndarray | None  # (sum of L*h*T*T,) float32, each row's (L, h, T, T) in C order
    weights_shape: np.ndarray | None  # (n, 4) int32 [L, h, T, T], zeros where not filled
    static: np.ndarray | None  # (sum attended_counts, d) float32 with --with-vectors
    contextual: np.ndarray | None  # (sum attended_counts, d_out) float32 with --with-vectors
    word_position: np.ndarray | None  # (n,) int64 the word's token position, -1: none (--word)
    word_vector: np.ndarray | None  # (n, d_out) float32, zeros where word_position is -1
    errors: int  # error rows
    lacking: int  # result rows whose word is missing

    def __len__(self) -> int:
        return len(self.line)

    def token_texts(self) -> list[str]:
        """(sum token_counts,) the tokens as written, whichever way they are held."""
        return self.tokens if self.pieces is None else self.table.text[self.pieces].tolist()


_SOURCE_CODES = {name: code for code, name in enumerate(TOKEN_SOURCES)}


def _codes(names, count: int) -> np.ndarray:
    """(count,) int8 TOKEN_SOURCES codes of source names."""
    return np.fromiter(map(_SOURCE_CODES.__getitem__, names), np.int8, count)


def _id_texts(records: list[dict]) -> list:
    """(n,) each record's JSON ``id`` as JSON text, None where the line gave none."""
    return [orjson.dumps(r["id"]).decode() if "id" in r else None for r in records]


def _scatter(flat: np.ndarray, starts: np.ndarray, block: np.ndarray) -> None:
    """Copy the B rows of ``block`` (B, ...) into ``flat`` (N, ...) at rows ``starts`` (B,) onward,
    each row's values one after the other: one slice copy a row (a fancy-indexed copy of the whole
    group computes an address per value, and cost 5x more on Brown lines' weights)."""
    values = block.reshape(len(block), -1, *flat.shape[1:])  # (B, k, ...)
    k = values.shape[1]
    for start, row in zip(starts.tolist(), values, strict=True):
        flat[start : start + k] = row


def chunk_columns(engine, chunk: list, options: dict, *, lists: bool = True) -> ChunkColumns | None:
    """The columns of ``chunk`` ((number, raw bytes) lines) for ``options``; None for an engine without
    batch's column machinery (then :func:`from_records`). ``lists=False`` leaves out the token list
    columns (tokens, sources, in_vocab, attended positions), which npz and the Projector do not keep.
    An unexpected failure raises: the caller redoes the chunk line by line."""
    if engine.columns is None:
        return None
    one_blas_thread()
    with collector_paused():
        return _chunk_columns(engine, chunk, options, lists)


def _chunk_columns(engine, chunk: list, options: dict, lists: bool) -> ChunkColumns:
    records, texts, read = parse_chunk(chunk, engine.label)  # a {"line": k} per line, ids and parse errors
    n, word, digits = len(records), options["word"], options.get("digits")
    error = [r.get("error") for r in records]
    texts, spelled = cropped(texts, word, engine.window)  # --window: each line around its --word
    sentences = columns.prepare_many(engine, texts)
    sentences.spelled = spelled
    for i, exc in sentences.errors.items():
        error[read[i]] = exc.render(engine.label)
    row_of = np.asarray(read, np.int64)  # (S,) each sentence's row
    lengths = np.zeros(n, np.int64)  # (n,) T of each row, 0 where not filled
    lengths[row_of] = np.maximum(sentences.lengths, 0)
    filled = lengths > 0  # the rows run in a group (plan_groups leaves out a length <= 0)
    attended_counts = lengths
    attended_starts = offsets(attended_counts)

    found = None if word is None else columns.word_positions(sentences, word)  # (S,) row in the sentence, -1
    flat_weights = weights_shape = weight_starts = static = contextual = word_vector = None
    if options["with_vectors"]:
        total = int(attended_starts[-1])
        static = np.zeros((total, engine.dim), np.float32)  # (A, d)
        contextual = np.zeros((total, engine.out_dim), np.float32)  # (A, d_out)
    if word is not None:
        word_vector = np.zeros((n, engine.out_dim), np.float32)  # (n, d_out)
    for members, group in asked_groups(engine, sentences, options):
        group = rounded(group, digits)
        rows = row_of[members]  # (B,) the group's rows in the chunk
        if options["weights"]:
            if flat_weights is None:  # every group has the same layers and heads
                L, h = group.weights.shape[1:3]
                weights_shape = np.zeros((n, 4), np.int32)
                weights_shape[filled] = [L, h, 0, 0]
                weights_shape[filled, 2] = weights_shape[filled, 3] = lengths[filled]
                weight_starts = offsets(np.prod(weights_shape, axis=1, dtype=np.int64))
                flat_weights = np.empty(int(weight_starts[-1]), np.float32)
            _scatter(flat_weights, weight_starts[rows], group.weights)  # (B, L, h, T, T)
        if static is not None:
            _scatter(static, attended_starts[rows], group.static)  # (B, T, d)
            _scatter(contextual, attended_starts[rows], group.contextual)  # (B, T, d_out)
        if word_vector is not None:
            holds = found[members] >= 0  # (B,)
            if group.word_vectors is not None:
                word_vector[rows[holds]] = group.word_vectors[holds]  # (S, d_out)
            else:
                word_vector[rows[holds]] = group.contextual[np.flatnonzero(holds), found[members][holds]]
    if options["weights"] and flat_weights is None:  # no group ran: every row an error
        weights_shape, flat_weights = np.zeros((n, 4), np.int32), np.zeros(0, np.float32)

    good = np.flatnonzero(filled[row_of]).tolist()  # the filled sentences, in input order
    text = [None] * n
    for i in good:
        text[read[i]] = texts[i]
    # the filled sentences' token columns, end to end; their tokens as strings only where a sentence was
    # prepared alone, else gathered from the table by piece id (see columnar's Arrow batch)
    as_pieces = not sentences.prepared
    flat = sentences.flat(good, lists=lists and not as_pieces)
    token_counts = np.zeros(n, np.int64)
    token_counts[row_of[good]] = flat.token_counts
    word_position = None
    lacking = 0
    if word is not None:
        word_position = np.full(n, -1, np.int64)
        at = found[good]  # (g,) the word's row among each sentence's attended tokens, -1: none
        holds = at >= 0
        attended_before = offsets(sentences.lengths[good])[:-1]  # (g,) where each one's attended positions begin
        word_position[row_of[good][holds]] = flat.attended[attended_before[holds] + at[holds]]
        lacking = len(good) - int(holds.sum())
    tokens = pieces = sources = in_vocab = attended_flat = None
    if lists:
        in_vocab, attended_flat = flat.in_vocab, flat.attended.astype(np.int32)  # (K,), (A,)
        if as_pieces:
            count = sentences.piece_ends - sentences.piece_starts  # (S,) tokens of each sentence
            pieces = sentences.pieces[np.repeat(filled[row_of], count)]  # (K,) the filled sentences' pieces
            sources = source_codes(engine.store, sentences.table.row[pieces], in_vocab).astype(np.int8)  # (K,)
        else:
            tokens, sources = flat.tokens, _codes(flat.sources, len(flat.tokens))
    return ChunkColumns(
        line=np.fromiter((r["line"] for r in records), np.int64, n),
        id=_id_texts(records),
        text=text,
        error=error,
        filled=filled,
        token_counts=token_counts,
        tokens=tokens,
        pieces=pieces,
        table=sentences.table,
        sources=sources,
        in_vocab=in_vocab,
        attended_counts=attended_counts,
        attended=attended_flat,
        weights=flat_weights,
        weights_shape=weights_shape,
        static=static,
        contextual=contextual,
        word_position=word_position,
        word_vector=word_vector,
        errors=sum(e is not None for e in error),
        lacking=lacking,
    )


def from_records(records: list[dict], options: dict, engine) -> ChunkColumns:
    """The columns of record dicts (``records.chunk_records``'s, or error records ``{"line", "error"}``)."""
    n = len(records)
    filled = np.array(["tokens" in r for r in records], bool)  # (n,)
    done = [r for r in records if "tokens" in r]
    chain = itertools.chain.from_iterable
    token_counts = np.zeros(n, np.int64)
    token_counts[filled] = [len(r["tokens"]) for r in done]
    attended_counts = np.zeros(n, np.int64)
    attended_counts[filled] = [len(r["attended_positions"]) for r in done]

    def flat(name: str, dim: int) -> np.ndarray:
        parts = [np.asarray(r[name], np.float32).reshape(-1, dim) for r in done]
        return np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)

    weights = weights_shape = static = contextual = word_position = word_vector = None
    if options["weights"]:
        weights_shape = np.zeros((n, 4), np.int32)
        weights_shape[filled] = [np.shape(r["weights"]) for r in done] or np.zeros((0, 4))
        weights = flat("weights", 1).ravel()
    if options["with_vectors"]:
        static, contextual = flat("static", engine.dim), flat("contextual", engine.out_dim)
    lacking = 0
    if options["word"] is not None:
        word_position = np.full(n, -1, np.int64)
        word_vector = np.zeros((n, engine.out_dim), np.float32)
        for row, r in enumerate(records):
            if r.get("word"):
                word_position[row] = r["word"]["position"]
                word_vector[row] = r["word"]["contextual"]
        lacking = sum(r.get("word", 0) is None and "error" not in r for r in records)
    return ChunkColumns(
        line=np.array([r["line"] for r in records], np.int64),
        id=_id_texts(records),
        text=[r.get("text") if "tokens" in r else None for r in records],
        error=[r.get("error") for r in records],
        filled=filled,
        token_counts=token_counts,
        tokens=list(chain(r["tokens"] for r in done)),
        pieces=None,
        table=None,
        sources=_codes(chain(r["sources"] for r in done), int(token_counts.sum())),
        in_vocab=np.fromiter(chain(r["in_vocab"] for r in done), np.bool_, int(token_counts.sum())),
        attended_counts=attended_counts,
        attended=np.fromiter(chain(r["attended_positions"] for r in done), np.int32, int(attended_counts.sum())),
        weights=weights,
        weights_shape=weights_shape,
        static=static,
        contextual=contextual,
        word_position=word_position,
        word_vector=word_vector,
        errors=sum("error" in r for r in records),
        lacking=lacking,
    )
