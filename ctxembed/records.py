"""One chunk of batch input lines -> their output records, encoded: the per-sentence work of ``batch``.

:mod:`ctxembed.batch` reads lines, spreads chunks over workers and writes the bytes back in order;
this module turns one chunk into bytes (parse, tokenise and look up, attention, records, JSON).
"""

from __future__ import annotations

import json

import numpy as np
import orjson  # encodes numpy arrays directly, ~10x faster than json

from ctxembed.errors import CtxembedError
from ctxembed.explore import Engine


def parse_line(number: int, raw: bytes) -> tuple[str | None, dict]:
    """(text or None, the record's fixed fields) for one input line."""
    record: dict = {"line": number}
    try:
        line = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        record["error"] = f"line is not valid UTF-8 (byte {exc.start + 1})"
        return None, record
    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            record["error"] = f"invalid JSON: {exc.msg} at column {exc.colno}"
            return None, record
        if not isinstance(obj, dict):
            record["error"] = "a JSON line must be an object with a 'text' field"
            return None, record
        if "id" in obj:
            record["id"] = obj["id"]
        text = obj.get("text")
        if not isinstance(text, str):
            record["error"] = "the JSON object has no string 'text' field"
            return None, record
        return text, record
    return line, record


def process_chunk(engine: Engine, chunk: list[tuple[int, bytes]], options: dict) -> bytes:
    """Input lines -> their output lines (bytes, newline-terminated), in the same order."""
    records: list[dict] = []
    prepared: list = []  # (index into records, Prepared)
    for number, raw in chunk:
        text, record = parse_line(number, raw)
        records.append(record)
        if text is None:
            continue
        try:
            prepared.append((len(records) - 1, engine.prepare(text)))
        except CtxembedError as exc:
            record["error"] = exc.render(engine.label)
    results = engine.run_many([p for _, p in prepared])
    for (index, _), result in zip(prepared, results, strict=True):
        _fill(records[index], result, options)
    return b"".join(_encode(record) for record in records)


def _fill(record: dict, result, options: dict) -> None:
    tokens = result.prepared.tokens
    record["text"] = result.prepared.text
    record["tokens"] = [t.text for t in tokens]
    record["in_vocab"] = result.prepared.in_vocab
    record["attended_positions"] = result.prepared.used
    if options["weights"]:
        # a view into the padded batch (L, B, h, T_max, T_max): orjson needs a contiguous array
        record["weights"] = np.ascontiguousarray(result.weights)  # (L, h, T, T)
    if options["with_vectors"]:
        record["static"] = result.static
        record["contextual"] = result.contextual
    word = options["word"]
    if word is not None:
        row = result.index_of(word)
        record["word"] = (
            None
            if row is None
            else {"word": word, "position": result.used_tokens()[row].position, "contextual": result.contextual[row]}
        )


def _encode(record: dict) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
