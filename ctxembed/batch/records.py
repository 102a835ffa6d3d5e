"""One chunk of batch input lines -> their output records, encoded: the per-sentence work of ``batch``.

:mod:`ctxembed.batch.driver` reads lines, spreads chunks over workers and writes the bytes back in order;
this module turns one chunk into bytes (parse, tokenise and look up, attention, records, JSON).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import operator
import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import orjson  # encodes numpy arrays directly, ~10x faster than json

from ctxembed.batch import columns
from ctxembed.engine import ContextEngine, crop
from ctxembed.errors import DataError


class LongLine(NamedTuple):
    """Stands for an input line refused unread because it passed ``limit`` bytes."""

    limit: int


def parse_line(number: int, raw: bytes | LongLine, label: Callable[[str], str] = str) -> tuple[str | None, dict]:
    """(text or None, the record's fixed fields) for one input line; never raises (``label``: how its
    errors name a setting, as the engine's ``label``).

    Whatever the line holds (invalid UTF-8, lone surrogates, JSON nested a thousand deep, an id
    no JSON encoder can write back), the record it gives can be encoded: the problem becomes
    its "error"."""
    record: dict = {"line": number}
    if isinstance(raw, LongLine):
        record["error"] = (
            f"line is longer than {raw.limit:,} bytes: skipped (raise {label('max_tokens')} for longer lines)"
        )
        return None, record
    try:
        line = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        record["error"] = f"line is not valid UTF-8 (byte {exc.start + 1})"
        return None, record
    if line.startswith("\ufeff") and number == 1:
        line = line[1:]  # a byte-order mark at the start of the file
    if not line.lstrip().startswith("{"):
        return line, record
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        at = "" if exc.msg.endswith(" at") else " at"  # "Unterminated string starting at" names a place
        record["error"] = f"invalid JSON: {exc.msg}{at} column {exc.colno}"
        return None, record
    except RecursionError:
        record["error"] = "invalid JSON: nested too deeply"
        return None, record
    if not isinstance(obj, dict):
        record["error"] = "a JSON line must be an object with a 'text' field"
        return None, record
    if "id" in obj:
        problem = _unwritable(obj["id"])
        if problem:
            record["error"] = f"the 'id' cannot be echoed back: {problem}"
            return None, record
        record["id"] = obj["id"]
    text = obj.get("text")
    if not isinstance(text, str):
        record["error"] = "the JSON object has no string 'text' field"
        return None, record
    if _has_surrogate(text):
        record["error"] = "the text holds a lone surrogate escape (such as \\ud800), which is not a character"
        return None, record
    return text, record


_MAX_ID_DEPTH = 64
_INT64_RANGE = (-(2**63), 2**64 - 1)


def _unwritable(value, depth: int = 0) -> str | None:
    """Why ``value`` cannot be written back as JSON (by orjson or json), or None."""
    if depth > _MAX_ID_DEPTH:
        return f"nested deeper than {_MAX_ID_DEPTH} levels"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if _INT64_RANGE[0] <= value <= _INT64_RANGE[1] else "an integer outside the 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "not a finite number"
    if isinstance(value, str):
        return "a lone surrogate escape" if _has_surrogate(value) else None
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list):
        return next((p for p in (_unwritable(v, depth + 1) for v in value) if p), None)
    return f"a {type(value).__name__}"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def error_record(number: int, message: str) -> bytes:
    """One encoded error record: ``{"line": k, "error": message}`` and a newline."""
    message = message.encode("utf-8", "replace").decode("utf-8")
    return (json.dumps({"line": number, "error": message}, ensure_ascii=False) + "\n").encode("utf-8")


def process_chunk(engine: ContextEngine, chunk: list[tuple[int, bytes]], options: dict) -> bytes:
    """Input lines -> their output lines (bytes, newline-terminated), in the same order."""
    return b"".join(encoded_records(engine, chunk, options))


def encoded_records(engine: ContextEngine, chunk: list[tuple[int, bytes]], options: dict) -> list[bytes]:
    """Input lines -> their output lines, one ``bytes`` each (newline-terminated), in the same order."""
    return Tally().records(engine, chunk, options)  # the counts unread


class Encoded(NamedTuple):
    """A chunk's output, with what a run's summary counts among it (no scan of the records)."""

    parts: list[bytes]  # the records in input order, newline-terminated, as pieces to write one after another:
    # the records themselves, or the pieces they crossed a worker's pipe in (never joined into one copy)
    lines: int  # records: one per input line
    errors: int  # error records
    lacking: int  # result records whose "word" is null


def all_errors(lines: list[bytes]) -> Encoded:
    """Error records only (:func:`error_record` each), counted as such."""
    return Encoded(lines, len(lines), len(lines), 0)


class Tally:
    """Error records and records lacking their word, counted where each record is made: from the record
    itself as it is encoded (:meth:`records`), or as an error record is written (:meth:`error`), never
    read back from the encoded bytes (whose field order is no contract)."""

    def __init__(self) -> None:
        self.errors = 0
        self.lacking = 0

    def records(self, engine: ContextEngine, chunk: list[tuple[int, bytes]], options: dict) -> list[bytes]:
        """:func:`encoded_records`, counted; a chunk counts only once all its records are made (a chunk
        that fails part way is redone line by line, see ``driver.safe_records``)."""
        errors = lacking = 0

        def encode(record: dict) -> bytes:
            nonlocal errors, lacking
            try:
                line = encode_record(record)
            except (TypeError, ValueError) as exc:  # orjson.JSONEncodeError is a TypeError
                errors += 1
                return error_record(record["line"], f"cannot encode the record ({exc})")
            if "error" in record:
                errors += 1
            elif record.get("word", 0) is None:  # --word given, and this sentence lacks it
                lacking += 1
            return line

        lines = chunk_records(engine, chunk, options, encode=encode)
        self.errors += errors
        self.lacking += lacking
        return lines

    def error(self, number: int, message: str) -> bytes:
        """:func:`error_record`, counted."""
        self.errors += 1
        return error_record(number, message)


def chunk_records(engine: ContextEngine, chunk: list[tuple[int, bytes]], options: dict, *, encode=None) -> list:
    """Input lines -> their records (dicts; NumPy arrays for vectors and weights), in the same order.

    With ``encode``, each record is replaced by ``encode(record)`` as soon as its group of sentences
    has run, so a chunk never holds more than one group's arrays (see :func:`asked_groups`)."""
    one_blas_thread()
    with collector_paused():
        return _chunk_records(engine, chunk, options, encode)


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for one chunk, then back as it was.

    A chunk allocates tens of thousands of small acyclic objects (token lists, Prepared, records),
    and the collector's passes over them cost ~5% of batch's CPU time (benchmarks/probes/profile_chunk.py:
    ~38 -> ~36 us per sentence). Reference counting still frees everything; a cycle, if any, waits
    for the next pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_chunk(
    chunk: list[tuple[int, bytes]], label: Callable[[str], str] = str
) -> tuple[list[dict], list[str], list[int]]:
    """parse_line of every line: (a record per line, the texts to run, per text its index into the
    records). A line whose record is already an error has no text.

    The usual chunk (plain sentences, valid UTF-8, no line refused as too long) is decoded in one
    pass with no step per line beyond the decoding; only a line that may be JSON (one starting with
    "{") is parsed on its own. Any other chunk goes line by line."""
    raws = list(map(_RAW, chunk))
    if not all(type(raw) is bytes for raw in raws):  # a LongLine
        return _parse_each(chunk, label)
    try:
        texts = [raw.decode("utf-8").rstrip("\r\n") for raw in raws]
    except UnicodeDecodeError:  # the line by line pass says which line and byte
        return _parse_each(chunk, label)
    records = [{"line": number} for number, _ in chunk]
    if chunk and chunk[0][0] == 1 and texts[0].startswith("\ufeff"):
        texts[0] = texts[0][1:]  # a byte-order mark at the start of the file
    if "{" not in "".join(texts):
        return records, texts, list(range(len(texts)))
    kept, read = [], []
    for index, text in enumerate(texts):
        if text.lstrip().startswith("{"):  # JSON, or not: parse_line decides
            text, records[index] = parse_line(*chunk[index], label)
            if text is None:
                continue
        kept.append(text)
        read.append(index)
    return records, kept, read


_RAW = operator.itemgetter(1)  # (number, raw) -> raw


def _parse_each(chunk: list[tuple[int, bytes]], label: Callable[[str], str]) -> tuple[list[dict], list[str], list[int]]:
    """:func:`parse_chunk` line by line."""
    records: list = []
    texts: list[str] = []
    read: list[int] = []
    for number, raw in chunk:
        text, record = parse_line(number, raw, label)
        records.append(record)
        if text is not None:
            texts.append(text)
            read.append(len(records) - 1)
    return records, texts, read


def cropped(texts: list[str], word: str | None, window: int) -> tuple[list[str], dict[int, str]]:
    """Batch's window: each text cropped to the tokens at most ``window`` either side of the token
    ``word`` names (``bank``: its first occurrence, ``bank#2`` its second; the other occurrences in the
    window are context like any word), by the one crop of every command (:func:`ctxembed.engine.crop`),
    and {text: how ``word`` names that token in it} where the crop changed it (``bank#2`` whose first
    bank was cut off is ``bank``). A text without the word stays whole (its record's word is null); no
    ``word`` or no window: the texts as they are."""
    if word is None or not window:
        return texts, {}
    pairs = [crop(text, word, window) for text in texts]
    spelled = {i: spelling for i, (_, spelling) in enumerate(pairs) if spelling != word}
    return [text for text, _ in pairs], spelled


def _chunk_records(engine: ContextEngine, chunk: list[tuple[int, bytes]], options: dict, encode) -> list:
    records, texts, read = parse_chunk(chunk, engine.label)
    texts, spelled = cropped(texts, options["word"], engine.window)
    if engine.columns is None:  # an engine without batch's column kernel (a trained model): the contract alone
        return _contract_records(engine, records, texts, read, options, encode, spelled)
    sentences = columns.prepare_many(engine, texts)
    sentences.spelled = spelled
    for i, exc in sentences.errors.items():
        records[read[i]]["error"] = exc.render(engine.label)
    done = [False] * len(records)
    for _, group in asked_groups(engine, sentences, options):
        filled = fill_group(records, read, group, options)
        if encode is not None:
            for index in filled:
                records[index] = encode(records[index])
                done[index] = True
    if encode is not None:
        records = [record if finished else encode(record) for record, finished in zip(records, done, strict=True)]
    return records


def asked_groups(engine: ContextEngine, sentences: columns.Sentences, options: dict):
    """:func:`columns.arrays` of what batch's ``options`` ask for: the weights with weights, the vectors
    when --with-vectors or --word reads them (else the weights alone are read), and with --word alone
    (no weights, no vectors) the word's vector only, one softmax row per sentence that holds it."""
    vectors = options["with_vectors"] or options["word"] is not None
    word_only = options["word"] if vectors and not (options["with_vectors"] or options["weights"]) else None
    return columns.arrays(engine, sentences, weights=options["weights"], vectors=vectors, word=word_only)


def _contract_records(
    engine, records: list[dict], texts: list[str], read: list[int], options: dict, encode, spelled: dict[int, str]
) -> list:
    """The records of a chunk through the engine contract only (prepare, then one run of the chunk):
    the same fields as :func:`fill_group`, for an engine that has no column machinery. ``spelled``: as
    :func:`cropped` gives it."""
    prepared, where, spellings = [], [], []
    for i, text in enumerate(texts):
        try:
            prepared.append(engine.prepare(text))
            where.append(read[i])
            spellings.append(spelled.get(i, options["word"]))
        except DataError as exc:
            records[read[i]]["error"] = exc.render(engine.label)
    digits = options.get("digits")

    def shown(array):
        return array if digits is None else np.round(array, digits)

    results = engine.run(prepared, weights=options["weights"])
    for index, sentence, result, spelling in zip(where, prepared, results, spellings, strict=True):
        record = records[index]
        record["text"], record["tokens"], record["in_vocab"] = sentence.text, sentence.texts, sentence.in_vocab
        record["attended_positions"], record["sources"] = sentence.used, sentence.sources()
        if options["weights"]:
            record["weights"] = np.ascontiguousarray(shown(result.weights))  # (L, h, T, T)
        if options["with_vectors"]:
            record["static"], record["contextual"] = shown(result.static), shown(result.contextual)  # (T, d)
        word = options["word"]
        if word is not None:
            row = sentence.index_of(spelling)
            record["word"] = (
                None
                if row is None
                else {"word": word, "position": sentence.used[row], "contextual": shown(result.contextual[row])}
            )
    return records if encode is None else [encode(record) for record in records]


_BLAS_LIMITED_IN: int | None = None  # the process that limited its BLAS threads


def one_blas_thread() -> None:
    """Limit this process's OpenBLAS to one thread, once. Batch runs one process per core, and its
    matrices are one sentence's (T x d): BLAS threads only oversubscribe the cores, and OpenBLAS's
    spinning threads cost batch about 40% more CPU time (2.1 s against 1.3 s of CPU for 20,000
    sentences, measured). The numbers are the same: each output element is computed by one thread
    either way."""
    global _BLAS_LIMITED_IN
    if _BLAS_LIMITED_IN == os.getpid():
        return
    _BLAS_LIMITED_IN = os.getpid()
    from threadpoolctl import threadpool_limits  # batch's processes only, once each (as train and senses limit theirs)

    threadpool_limits(limits=1, user_api="blas")  # not a context: the limit holds for this process


def fill_group(records: list[dict], read: list[int], group, options: dict) -> list[int]:
    """The records of a :class:`ctxembed.batch.columns.ColumnGroup`'s sentences, filled from its columns
    and arrays (arrays as views); returns their indices into ``records``. Sentence ``i`` of the group's
    :class:`ctxembed.batch.columns.Sentences` is the record ``records[read[i]]``."""
    sentences, members = group.sentences, group.members
    texts, tokens, in_vocab, attended, sources = (
        sentences.texts, sentences.tokens, sentences.in_vocab, sentences.attended, sentences.sources_of
    )  # fmt: skip
    indices = [read[i] for i in members]
    group = rounded(group, options.get("digits"))
    weights = list(group.weights) if options["weights"] else None  # B views (L, h, T, T), each one block
    word_vectors = group.word_vectors  # (B, d_out) or None: then the word's row of group.contextual
    word = options["word"]
    found = None if word is None else sentences.word_rows(word)  # (n,) every sentence's row, -1: none
    for b, (i, index) in enumerate(zip(members, indices, strict=True)):
        record = records[index]
        record["text"] = texts[i]
        record["tokens"] = tokens[i]
        record["in_vocab"] = in_vocab[i]  # per token: has a vector
        record["attended_positions"] = attended[i]
        record["sources"] = sources[i]  # per token: vocabulary, estimated, subword or none
        if weights is not None:
            record["weights"] = weights[b]  # (L, h, T, T), contiguous (orjson needs that)
        if options["with_vectors"]:
            record["static"] = group.static[b]  # (T, d)
            record["contextual"] = group.contextual[b]  # (T, d_out)
        if word is not None:
            row = sentences.index_of(i, word) if found is None else (int(found[i]) if found[i] >= 0 else None)
            vector = None if row is None else (group.contextual[b, row] if word_vectors is None else word_vectors[b])
            record["word"] = None if row is None else {"word": word, "position": attended[i][row], "contextual": vector}
    return indices


def rounded(group, digits: int | None):
    """The group with its weights and vectors rounded to ``digits`` decimals (--digits), float32 still:
    the nearest float32 to each rounded decimal, so its shortest text has at most ``digits`` decimals."""
    if digits is None:
        return group
    return dataclasses.replace(
        group,
        **{
            name: np.round(getattr(group, name), digits)  # same shape, float32
            for name in ("weights", "static", "contextual", "word_vectors")
            if getattr(group, name) is not None
        },
    )


def encode_record(record: dict) -> bytes:
    """One record as a JSON line (numpy arrays written by orjson, float32 in their shortest form)."""
    return orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
