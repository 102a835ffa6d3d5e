"""Every JSON document the CLI writes matches its schema in docs/schemas/ and the shapes docs/json.md promises.

The schemas are JSON Schema draft 2020-12. No validator library is a dependency, so a small one lives
here: it knows exactly the keywords the schema files use, and a test fails if a schema uses any other
(so no keyword is silently ignored). Array shapes that JSON Schema cannot express (weights are
[layer][head][query][key] with query and key indexing ``attended_positions``) are checked by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.cli_helpers import TOY, invoke, json_lines, run_json, strict_json, succeeds
from tests.conftest import REPO
from tests.test_space import tiny_space  # noqa: F401  (the tiny model with its contextual space)

SCHEMAS = REPO / "docs" / "schemas"


# ------------------------------------------------------------------------------ a small 2020-12 validator
KEYWORDS = {
    "$schema", "$id", "$defs", "$ref", "title", "description",
    "type", "const", "enum", "properties", "required", "additionalProperties",
    "items", "minItems", "maxItems", "minimum", "maximum", "anyOf", "oneOf", "pattern",
}  # fmt: skip
_FILES: dict[str, dict] = {}


def schema_file(name: str) -> dict:
    if name not in _FILES:
        _FILES[name] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return _FILES[name]


def _resolve(ref: str, base: str) -> tuple[dict, str]:
    """A $ref: "#/$defs/x" in the same file or "common.schema.json#/$defs/x"."""
    file, _, pointer = ref.partition("#")
    file = file or base
    node = schema_file(file)
    for part in pointer.strip("/").split("/") if pointer.strip("/") else []:
        node = node[part]
    return node, file


def _is(value, type_name: str) -> bool:
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    return isinstance(value, kinds[type_name])


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def schema_errors(value, schema: dict, base: str, path: str = "$") -> list[str]:
    """Everything wrong with ``value`` against ``schema`` (read from file ``base``); [] when valid."""
    errors: list[str] = []
    if "$ref" in schema:
        target, file = _resolve(schema["$ref"], base)
        errors += schema_errors(value, target, file, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, t) for t in types):
            return errors + [f"{path}: {value!r:.60} is not {' or '.join(types)}"]
    if "const" in schema and not _same(value, schema["const"]):
        errors.append(f"{path}: {value!r:.60} is not {schema['const']!r}")
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        errors.append(f"{path}: {value!r:.60} is not one of {schema['enum']}")
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing {key!r}")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(item, properties[key], base, f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected {key!r}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += schema_errors(item, schema["additionalProperties"], base, f"{path}.{key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: {len(value)} items, fewer than {schema['minItems']}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: {len(value)} items, more than {schema['maxItems']}")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += schema_errors(item, schema["items"], base, f"{path}[{i}]")
    if "anyOf" in schema and all(schema_errors(value, s, base, path) for s in schema["anyOf"]):
        errors.append(f"{path}: matches none of anyOf")
    if "oneOf" in schema:
        matching = sum(not schema_errors(value, s, base, path) for s in schema["oneOf"])
        if matching != 1:
            errors.append(f"{path}: matches {matching} of oneOf, not exactly 1")
    return errors


def _used_keywords(schema: dict):
    for key, value in schema.items():
        yield key
        if key in ("properties", "$defs"):
            for sub in value.values():
                yield from _used_keywords(sub)
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            yield from _used_keywords(value)
        elif key in ("anyOf", "oneOf"):
            for sub in value:
                yield from _used_keywords(sub)


SCHEMA_FILES = {
    "ctxembed.attend/5": "attend.schema.json",
    "ctxembed.compare/5": "compare.schema.json",
    "ctxembed.neighbors/3": "neighbors.schema.json",
    "ctxembed.batch/1": "batch.schema.json",
    "ctxembed.vectors-info/1": "vectors-info.schema.json",
    "ctxembed.vectors-convert/1": "vectors-convert.schema.json",
    "ctxembed.senses/2": "senses.schema.json",
    "ctxembed.eval-wsi/1": "eval-wsi.schema.json",
    "ctxembed.eval-wic/1": "eval-wic.schema.json",
    "ctxembed.eval-senses/1": "eval-senses.schema.json",
    "ctxembed.eval-pairs/2": "eval-pairs.schema.json",
    "ctxembed.mix-fit/1": "mix-fit.schema.json",
    "ctxembed.train/1": "train.schema.json",
    "ctxembed.before-after/1": "before-after.schema.json",
    "ctxembed.side-by-side/1": "side-by-side.schema.json",
}


def assert_valid(document, schema_name: str) -> None:
    file = SCHEMA_FILES[schema_name]
    errors = schema_errors(document, schema_file(file), file)
    assert not errors, "\n".join(errors[:20])


# ------------------------------------------------------------------------------ shapes JSON Schema cannot say
def shape(nested) -> tuple[int, ...]:
    """The shape of a nested list, failing on ragged lists."""
    array = np.array(nested, dtype=float)  # ragged lists raise ValueError
    return array.shape


def assert_attend_shapes(doc: dict) -> None:
    settings = doc["settings"]  # the attention settings, or a trained model's description (layers, heads)
    attention = settings.get("attention", settings)
    positions = doc["attended_positions"]
    T = len(positions)
    assert [t["position"] for t in doc["tokens"]] == list(range(len(doc["tokens"])))
    assert positions == [t["position"] for t in doc["tokens"] if t["used"]]
    assert doc["skipped"] == [{"text": t["text"], "position": t["position"]} for t in doc["tokens"] if not t["used"]]
    assert shape(doc["weights"]) == (attention["layers"], attention["heads"], T, T)
    assert len(doc["top_attended"]) == T and len(doc["static_contextual_cosine"]) == T
    for tops in doc["top_attended"]:
        assert {t["position"] for t in tops} <= set(positions)
    if "static" in doc:
        assert shape(doc["static"]) == (T, doc["vectors"]["dim"])
        assert shape(doc["contextual"])[0] == T
    if "explain" in doc:
        steps = doc["explain"]
        U = T if steps["level"] == "words" else len(steps["tokens"])  # a subword model's pieces: [CLS] ... [SEP]
        assert len(steps["tokens"]) == len(steps["sources"]) == U
        for name in ("raw_scores", "scaled_scores", "scores", "weights"):
            assert shape(steps[name]) == (U, U)
        for name in ("inputs", "queries", "keys", "values", "context", "output"):
            assert shape(steps[name])[0] == U
        if steps["mix"] is not None:  # the read-out is over words
            assert len(steps["mix"]["tokens"]) == shape(steps["mix"]["contextual"])[0] == T


def assert_compare_shapes(doc: dict) -> None:
    N = len(doc["sentences"])
    assert len(doc["skipped"]) == N
    if doc["word"] is not None:  # --word: the top level is that word's
        assert doc["word"] == doc["words"][0]["word"]
        assert doc["static_similarity"] == doc["words"][0]["static_similarity"]
        assert doc["layers"] == doc["words"][0]["layers"]
    else:
        assert doc["static_similarity"] is None and doc["contextual_similarity"] is None
        assert doc["layers"] is None
    assert [row["word"] for row in doc["summary"]] == [entry["word"] for entry in doc["words"]]
    for row, entry in zip(doc["summary"], doc["words"], strict=True):
        upper = np.array(entry["contextual_similarity"])[np.triu_indices(N, k=1)]  # each pair once
        assert row["contextual_mean"] == pytest.approx(upper.mean(), abs=1e-6)
        assert row["contextual_lowest"] == pytest.approx(upper.min(), abs=1e-6)
    for entry in doc["words"]:
        assert len(entry["positions"]) == N
        for name in ("static_similarity", "contextual_similarity"):
            matrix = np.array(entry[name])
            assert matrix.shape == (N, N)
            assert np.allclose(matrix, matrix.T)
        layers = np.array(entry["layers"])  # (L + 1, N, N): the attention input, then each layer
        settings = doc["settings"]  # the attention settings, or a trained model's description
        assert layers.shape == (settings.get("attention", settings)["layers"] + 1, N, N)
        assert np.allclose(layers, layers.swapaxes(1, 2))


def assert_batch_record_shapes(record: dict) -> None:
    if "error" in record:
        return
    T = len(record["attended_positions"])
    assert len(record["in_vocab"]) == len(record["tokens"])
    assert record["attended_positions"] == [i for i, ok in enumerate(record["in_vocab"]) if ok]  # --oov skip
    if "weights" in record:
        layers, heads, rows, cols = shape(record["weights"])
        assert (rows, cols) == (T, T) and layers >= 1 and heads >= 1


# ------------------------------------------------------------------------------ the schemas themselves
@pytest.mark.parametrize("file", sorted(p.name for p in SCHEMAS.glob("*.json")))
def test_schema_file_is_2020_12_and_uses_only_checked_keywords(file):
    schema = schema_file(file)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(_used_keywords(schema)) <= KEYWORDS


def test_every_document_type_has_a_schema_file():
    for name, file in SCHEMA_FILES.items():
        assert schema_file(file)["title"] == name


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_json_md_documents_every_field(name):
    text = (REPO / "docs" / "json.md").read_text(encoding="utf-8")
    schema = schema_file(SCHEMA_FILES[name])
    assert f"`{name}`" in text
    fields = set(schema.get("properties", {}))
    for sub in schema.get("$defs", {}).values():
        fields |= set(sub.get("properties", {}))
    missing = sorted(f for f in fields if f"`{f}`" not in text)
    assert not missing


def test_validator_rejects_a_missing_field_a_wrong_type_and_an_extra_field():
    doc = run_json("vectors", "info", "--json")
    assert_valid(doc, "ctxembed.vectors-info/1")
    file = SCHEMA_FILES["ctxembed.vectors-info/1"]
    without = {k: v for k, v in doc.items() if k != "dim"}
    assert schema_errors(without, schema_file(file), file) == ["$: missing 'dim'"]
    assert schema_errors({**doc, "dim": "100"}, schema_file(file), file) == ["$.dim: '100' is not integer or null"]
    assert schema_errors({**doc, "extra": 1}, schema_file(file), file) == ["$: unexpected 'extra'"]


def test_validator_follows_refs_into_common_definitions():
    doc = run_json("attend", "the river bank", "--json")
    doc["vectors"]["words"] = True  # a boolean is not an integer
    doc["weights"][0][0][0][0] = 1.5  # a weight above 1
    errors = schema_errors(doc, schema_file("attend.schema.json"), "attend.schema.json")
    assert errors == ["$.vectors.words: True is not integer", "$.weights[0][0][0][0]: 1.5 > 1.000001"]


def test_ragged_weights_fail_the_shape_check():
    doc = run_json("attend", "the river bank", "--json")
    doc["weights"][0][0][1] = doc["weights"][0][0][1][:2]
    with pytest.raises(ValueError):
        assert_attend_shapes(doc)


def test_strict_json_rejects_nan():
    with pytest.raises(ValueError):
        strict_json('{"x": NaN}')


# ------------------------------------------------------------------------------ real outputs
@pytest.mark.parametrize(
    "args",
    [
        ["we sat on the river bank"],
        ["I don't like it's flavour xqzzv", "--with-vectors", "--explain"],
        ["the cat sat on the mat", "--preset", "textbook", "--heads", "4", "--layers", "2", "--with-vectors"],
        ["it's fine", "--oov", "zero", "--preset", "notes", "--causal", "--explain"],
        ["bank"],  # one token with the diagonal masked: an all-zero row
        ["the cat sat", "--preset", "textbook", "--heads", "2", "--layers", "2", "--attention", "value-norm"],
        ["we sat on the river bank", "--attention", "rollout"],
        ["we sat on the river bank", "--attention", "mean", "--explain"],
    ],
)
def test_attend_document_matches_schema(args):
    doc = run_json("attend", *args, "--json")
    assert_valid(doc, "ctxembed.attend/5")
    assert_attend_shapes(doc)


def test_attend_explain_under_minilm_matches_schema(minilm_folder):
    """A trained model's explain: rows are its pieces with [CLS] and [SEP], the read-out over the words."""
    doc = run_json("attend", "the riverside bank", "--model", "minilm", "--explain", "--word", "bank", "--json")
    assert_valid(doc, "ctxembed.attend/5")
    assert_attend_shapes(doc)
    assert doc["explain"]["level"] == "pieces" and doc["explain"]["mix"] is not None


def test_attend_cosine_is_null_not_nan_when_sizes_differ():
    doc = run_json(
        "attend", "the river bank", "--preset", "textbook", "--projection", "random", "--d-out", "8", "--json"
    )
    assert_valid(doc, "ctxembed.attend/5")
    assert doc["static_contextual_cosine"] == [None, None, None]


def test_compare_document_matches_schema():
    doc = run_json("compare", "the river bank", "the money bank", "I saw the bank", "--json")
    assert_valid(doc, "ctxembed.compare/5")
    assert_compare_shapes(doc)
    assert doc["word"] is None and [row["word"] for row in doc["summary"]] == ["the", "bank"]
    given = run_json("compare", "the river bank", "the money bank", "I saw the bank", "--word", "bank", "--json")
    assert_valid(given, "ctxembed.compare/5")
    assert_compare_shapes(given)
    assert given["word"] == "bank" and len(given["summary"]) == 1
    assert [entry["word"] for entry in doc["words"]] == ["the", "bank"]


def test_neighbors_document_matches_schema():
    doc = run_json("neighbors", "the river bank", "--word", "bank", "-k", "5", "--json")
    assert_valid(doc, "ctxembed.neighbors/3")


def test_a_trained_models_contextual_neighbours_match_the_schema(tiny_space):  # noqa: F811 (the fixture)
    """The contextual space's search record (compared, candidates) is in the schema, which the senses'
    label_search shares (tests/test_senses_trained.py)."""
    from ctxembed.api import Explorer

    doc = Explorer(model=tiny_space.model).neighbors("we sat on the river bank", "bank", 5).document()
    assert doc["search"]["compared"] and doc["search"]["candidates"] > 0
    assert_valid(doc, "ctxembed.neighbors/3")


def test_batch_records_match_schema(tmp_path):
    lines = [
        "we sat on the river bank",
        '{"id": "a", "text": "the money bank"}',
        "{broken",
        '{"id": 7}',
        "",
        "xqzzv qqxj",  # no row: both words built from subwords
    ]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = json_lines(succeeds("batch", source, "--word", "bank", "--with-vectors").stdout)
    assert [("error" in r) for r in records] == [False, False, True, True, True, False]
    for record in records:
        assert_valid(record, "ctxembed.batch/1")
        assert_batch_record_shapes(record)


def test_vectors_info_of_an_unconverted_file_matches_schema(tmp_path):
    (tmp_path / "toy.txt").write_bytes(Path(TOY).read_bytes())
    doc = run_json("vectors", "info", tmp_path / "toy.txt", "--json")
    assert_valid(doc, "ctxembed.vectors-info/1")
    assert doc["cache_state"] == "missing" and (doc["words"], doc["dim"], doc["dtype"]) == (4, 3, None)


def test_vectors_convert_document_matches_schema(tmp_path):
    doc = run_json("vectors", "convert", TOY, tmp_path / "toy.ctxv", "--quantize", "--json")
    assert_valid(doc, "ctxembed.vectors-convert/1")
    assert Path(doc["out"]).stat().st_size == doc["bytes"]


def test_settings_schema_is_generated_from_the_declarations():
    import runpy

    settings_schema = runpy.run_path(str(REPO / "scripts" / "settings_docs.py"))["settings_schema"]
    # after adding or changing a setting: .venv/bin/python scripts/settings_docs.py
    assert schema_file("common.schema.json")["$defs"]["settings"] == json.loads(json.dumps(settings_schema()))


def test_senses_document_matches_schema(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "".join(line.split("\t")[2] + "\n" for line in (REPO / "data" / "senses.tsv").read_text().splitlines()[1:]),
        encoding="utf-8",
    )
    doc = run_json("senses", "bank", "plant", corpus, "--json")
    assert_valid(doc, "ctxembed.senses/2")


def test_eval_wsi_document_matches_schema():
    doc = run_json("eval", "wsi", REPO / "data" / "wsi-senses.tsv", "-c", "default", "--json")
    assert_valid(doc, "ctxembed.eval-wsi/1")


# ------------------------------------------------------------------------------ eval documents
FIXTURES = REPO / "tests" / "fixtures"


def eval_json(*args) -> dict:
    """An eval document; eval notes its progress ("evaluating ...") on stderr."""
    result = invoke("eval", *args, "--json")
    assert result.exit_code == 0, result.stderr
    assert all(line.startswith(("evaluating ", "converting ", "note: skipped ")) for line in result.stderr.splitlines())
    return strict_json(result.stdout)


def test_eval_wic_document_matches_schema():
    doc = eval_json("wic", FIXTURES / "wic", "-c", "static", "-c", "textbook", "-c", "default")
    assert_valid(doc, "ctxembed.eval-wic/1")
    assert [row["name"] for row in doc["configs"]] == ["static", "textbook", "default"]
    assert doc["config"] == "default" and doc["splits"] == doc["configs"][2]["splits"]


def test_eval_senses_document_matches_schema():
    doc = eval_json("senses", "-c", "static", "-c", "default")
    assert_valid(doc, "ctxembed.eval-senses/1")
    assert doc["configs"][0]["settings"] is None and doc["configs"][1]["settings"]["preset"] == "default"


@pytest.mark.parametrize("file", ["scws_tiny.txt", "wordpairs_tiny.tsv"])
def test_eval_pairs_document_matches_schema(file):
    doc = eval_json("pairs", FIXTURES / file, "-c", "static", "-c", "textbook")
    assert_valid(doc, "ctxembed.eval-pairs/2")
    assert doc["layout"] == ("scws" if file.startswith("scws") else "word-pairs")


def test_eval_schemas_refuse_a_wrong_document():
    doc = eval_json("pairs", FIXTURES / "scws_tiny.txt", "-c", "static")
    doc["configs"][0]["spearman"] = 2.0
    file = SCHEMA_FILES["ctxembed.eval-pairs/2"]
    assert schema_errors(doc, schema_file(file), file) == ["$.configs[0]: matches none of anyOf"]
