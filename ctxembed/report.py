"""Results -> documents: the dicts that become JSON, and that the renderer lays out as tables.

One document per command, each with a ``schema`` naming its type and version (see
docs/json.md). Numbers stay NumPy here; :mod:`ctxembed.output` makes them JSON-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ctxembed.core.attention import build_mask, masked_keys, mean_over_heads, twin_ids
from ctxembed.core.readings import READINGS, rollout, score_terms, value_norm
from ctxembed.core.similarity import cosine, cosine_matrix
from ctxembed.engine import Contextualized, locate, split_word
from ctxembed.engine.steps import named_steps
from ctxembed.errors import DataError, SettingError, UsageError, counted
from ctxembed.options import NEIGHBOURS_AMONG, OPTIONS, default
from ctxembed.vectors.search import nearest

if TYPE_CHECKING:  # annotations only: a trained model's document does not load the glove engine
    from ctxembed.engine import ContextEngine, Engine, LayerTrace, ModelCard


def settings_block(engine: ContextEngine, *, window: int = 0) -> dict:
    """A document's ``settings`` and ``settings_summary``: what computed it, as its engine describes
    itself (:meth:`ContextEngine.describe`), so every document of one model carries the same block;
    with ``window`` (the tokens either side of the word its sentences were cropped to, 0: none) said
    in both when one was applied."""
    if not window:
        return {"settings": engine.describe(), "settings_summary": engine.summary()}
    return {
        "settings": engine.describe() | {"window": window},
        "settings_summary": f"{engine.summary()} | window ±{window} tokens",
    }


def token_records(result: Contextualized) -> list[dict]:
    """Every token of the sentence, in order: its text, position, vocabulary key, whether it has a
    vector and took part in attention, and where its vector came from (``source``)."""
    used = set(result.prepared.used)
    prepared = result.prepared
    records = [
        {
            "text": t.text,
            "position": t.position,
            "key": key,
            "in_vocab": ok,
            "used": t.position in used,
            "source": source,
        }
        for t, key, ok, source in zip(
            prepared.tokens, prepared.keys, prepared.in_vocab, prepared.sources(), strict=True
        )
    ]
    for record, pieces in zip(records, prepared.pieces(), strict=True):
        if pieces is not None:  # a word a subword model split: its pieces (only then, so glove's bytes stay)
            record["pieces"] = pieces
    return records


def sentence_warnings(results: list[Contextualized]) -> list[str]:
    """The documents' ``warnings``: a line per sentence whose vectors are mostly guesses (the rule is
    :func:`ctxembed.engine.sentence.tokens_warning`); of several sentences, each names its number."""
    found = [(number, r.prepared.warning()) for number, r in enumerate(results, start=1)]
    several = len(results) > 1
    return [f"sentence {number}: {line}" if several else line for number, line in found if line is not None]


def twins_warning(result: Contextualized, word: str) -> str | None:
    """A line for people when ``word`` names a repeated word whose copies came out with one contextual
    vector (without word order, copies of a word see the same sentence and get the same vector), so
    ``bank#2`` cannot differ from ``bank``; None otherwise."""
    found = result.prepared.locate(word)
    if found is None or found[2] < 2:
        return None
    name = result.used_tokens()[found[0]].text.lower()
    rows = [result.prepared.locate(f"{name}#{k}") for k in range(1, found[2] + 1)]
    vectors = result.contextual[[r[0] for r in rows if r is not None]]  # (copies, d_out)
    if len(vectors) < 2 or not np.allclose(vectors, vectors[0], rtol=1e-5, atol=1e-7):
        return None
    copies = " and ".join([name, *(f"{name}#{k}" for k in range(2, found[2] + 1))])
    return (
        f"{copies} share one contextual vector: these settings give attention no word order, so copies of a "
        "word see the same sentence (--positions adds word order; a trained model such as --model minilm has it)"
    )


def skipped_records(result: Contextualized) -> list[dict]:
    return [{"text": t.text, "position": t.position} for t in result.prepared.skipped]


def top_attended(weights: np.ndarray, result: Contextualized, top: int) -> list[list[dict]]:
    """For each query token, its ``top`` keys by weight: weights (T, T)."""
    tokens = result.used_tokens()
    order = np.argsort(-weights, axis=1, kind="stable")[:, :top]  # (T, top)
    return [
        [
            {"position": tokens[j].position, "text": tokens[j].text, "weight": float(weights[i, j])}
            for j in row
            if weights[i, j] > 0
        ]  # masked keys (self, future) have weight 0 and are not listed
        for i, row in enumerate(order)
    ]


def attend_document(
    result: Contextualized,
    engine: ContextEngine,
    vectors: dict,
    *,
    with_vectors: bool = default("with_vectors"),
    top: int = default("top"),
) -> dict:
    summary = mean_over_heads(result.weights[-1])  # (h, T, T) -> (T, T) the last layer
    masks = engine.card.masks
    doc = {
        "schema": "ctxembed.attend/5",
        "vectors": vectors,
        **settings_block(engine),
        "text": result.prepared.text,
        "tokens": token_records(result),
        "skipped": skipped_records(result),
        "attended_positions": list(result.prepared.used),
        "weights": result.weights,  # (L, h, T, T)
        "masked_keys": masked_keys(
            len(result.prepared.used),
            causal=masks.causal,
            exclude_self=masks.exclude_self,
            twins=twin_ids(result.static) if masks.exclude_twins else None,
        ),
        "top_attended": top_attended(summary, result, top),
        "static_contextual_cosine": result.moved(),
        "warnings": sentence_warnings([result]),
    }
    if result.hidden_share is not None:  # a subword model's [CLS], [SEP]: what the word rows leave out
        doc["hidden"] = {"units": list(result.hidden_units), "share": result.hidden_share}  # (L, h, T, S)
    if with_vectors:
        doc["static"] = result.static
        doc["contextual"] = result.contextual
    return doc


READING_ABOUT = {
    "mean": "the mean of each layer's heads",
    "rollout": "attention rollout (Abnar & Zuidema 2020): each layer's head mean plus 0.5 I for the residual, "
    "multiplied through the layers; layer l: how much of each input token reaches each position after it",
    "value-norm": "value-norm attention (Kobayashi et al. 2020): ||weight x value x W_out|| of what each key "
    "sends, per head and for the heads added up, each row divided by its sum",
}


def check_reading(reading: str, *, head: int | None = None, all_heads: bool = False) -> None:
    """Refuse an unknown reading, and a head asked of a reading that has one map per layer."""
    if reading not in READINGS:
        raise UsageError(f"{{attention}} must be one of {', '.join(READINGS)}, not {reading!r}", "attention")
    if not READINGS[reading] and (head is not None or all_heads):
        raise UsageError(
            f"{{attention}} {reading} has one map per layer, not one per head: drop {{head}} and {{all_heads}}",
            "attention",
            "head",
            "all_heads",
        )


def check_specials(
    specials: str, card: ModelCard, *, attention: str, all_heads: bool = False, all_layers: bool = False
) -> None:
    """Refuse a ``specials`` view of an attend document that cannot be drawn, before any attention: not
    ``hide`` or ``show``; ``show`` (a subword model's [CLS] and [SEP] as columns of their own) beside a view
    of many maps (every head, every layer, a reading that mixes them); ``show`` for a model whose word maps
    hide nothing (``card.masks.hidden`` empty). One check for the command line and the API."""
    OPTIONS["specials"].check(specials)
    if specials != "show":
        return
    if all_heads or all_layers or attention in ("rollout", "value-norm"):
        raise UsageError(
            "{specials} show draws one map of the weights: drop {all_heads}, {all_layers} and "
            "{attention} rollout|value-norm",
            "specials",
            "all_heads",
            "all_layers",
            "attention",
        )
    if not card.masks.hidden:
        raise UsageError(
            f"{{specials}} show: model {card.name} has no [CLS] or [SEP]: every unit is a word", "specials"
        )


def attention_reading(
    result: Contextualized,
    reading: str,
    engine: ContextEngine,
    masked: list[list[int]],
    *,
    top: int = default("top"),
) -> dict:
    """The ``attention`` object of an attend document: ``reading`` of the result's attention.

    ``layers`` (L, T, T) is the reading of each whole layer, ``heads`` (L, h, T, T) its map per head
    (None for mean and rollout), ``sent_norms`` (L, h, T) how long a vector each word sends through each
    head (value-norm only), ``top_attended`` as the document's, read from the last layer's map, and
    ``masked_keys`` the cells forced to 0 (``masked``, the document's; none for rollout). Rollout and
    value-norm are computed on the units the model ran on (:meth:`ContextEngine.attention_parts`), then
    aggregated to words; value-norm needs a result run with ``trace=True``."""
    check_reading(reading)
    heads = sent_norms = None
    if reading == "mean":
        layers = mean_over_heads(result.weights)  # (L, h, T, T) -> (L, T, T)
    elif reading == "rollout":
        parts = engine.attention_parts(result)
        layers = parts.to_words(rollout(parts.weights))  # (L, P, P) -> (L, T, T)
    elif reading == "value-norm":
        parts = engine.attention_parts(result)
        if parts.sent is None:
            raise ValueError("value-norm needs a result computed with trace=True")
        per_layer = [value_norm(w, sent) for w, sent in zip(parts.weights, parts.sent, strict=True)]
        layers = parts.to_words(np.stack([r.layer for r in per_layer]))  # (L, P, P) -> (L, T, T)
        heads = parts.to_words(np.stack([r.heads for r in per_layer]))  # (L, h, P, P) -> (L, h, T, T)
        sent_norms = np.stack([r.sent_norms for r in per_layer])  # (L, h, P)
        if sent_norms.shape[-1] != layers.shape[-1]:  # a subword model: per piece, no word to name
            sent_norms = None
    else:  # raw: the document's own weights
        raise ValueError("the raw weights are the document's 'weights'; no reading to add")
    return {
        "reading": reading,
        "about": READING_ABOUT[reading],
        "layers": layers,
        "heads": heads,
        "sent_norms": sent_norms,
        "top_attended": top_attended(layers[-1], result, top),
        # rollout's 0.5 I keeps every word on itself, so no cell of it is forced to 0
        "masked_keys": [[] for _ in layers[-1]] if reading == "rollout" else masked,
    }


def focus_token(doc: dict, word: str) -> tuple[int, int, int]:
    """(row, occurrence, occurrences) of ``--focus``/``--word``: ``#N`` is the token at position N,
    ``bank#2`` the second ``bank``, ``bank`` the first (a token's text or vocabulary key, any case).
    A word the sentence does not hold is a DataError (exit 1), as in every command."""
    positions = list(doc["attended_positions"])
    tokens = doc["tokens"]
    texts = [t["text"] for t in tokens]
    keys = [t["key"] or t["text"] for t in tokens]
    found = locate(word, texts, keys, positions)
    if found is not None:
        return found
    name, number = split_word(word)
    if name is None:
        raise DataError(f"{word}: no token at position {number} took part in attention")
    shown = ", ".join(f"{tokens[p]['text']}" for p in positions)
    if number is not None and locate(name, texts, keys, positions) is not None:
        count = locate(name, texts, keys, positions)[2]
        raise DataError(f"{word}: {name!r} occurs {counted(count, 'time')} among the tokens ({shown})")
    raise DataError(f"{word!r} is not among the tokens ({shown})")


def focus_row(doc: dict, word: str) -> int:
    """Row (query index) of ``--focus``: see :func:`focus_token`."""
    return focus_token(doc, word)[0]


def row_at_position(doc: dict, position: int) -> int:
    """Row of the first attended token at or after ``position`` (the last row when there is none)."""
    positions = list(doc["attended_positions"])
    return next((row for row, p in enumerate(positions) if p >= position), len(positions) - 1)


def shared_words(results: list[Contextualized]) -> list[str]:
    """Vocabulary keys used in every sentence, in the first sentence's order, words only."""
    keysets = [{t.key for t in r.used_tokens()} for r in results]
    common = set.intersection(*keysets)
    seen, ordered = set(), []
    for token in results[0].used_tokens():
        if token.key in common and token.key not in seen and any(c.isalnum() for c in token.key):
            seen.add(token.key)
            ordered.append(token.key)
    return ordered


def locate_word(result: Contextualized, word: str, where: str, *, listing: bool = True) -> tuple[int, int, int]:
    """(row, occurrence, occurrences) of ``word`` (``bank``, ``bank#2``, ``#8``) in ``result``, or a
    DataError saying what the sentence holds."""
    found = result.prepared.locate(word)
    if found is not None:
        return found

    name, number = split_word(word)
    if name is not None and number is not None:
        count = len(
            [t for t in result.used_tokens() if t.key.lower() == name.lower() or t.text.lower() == name.lower()]
        )
        if count:
            raise DataError(f"{name!r} occurs {counted(count, 'time')} in {where}: {word} does not exist")
    if name is None:
        raise DataError(f"no token at position {number} of {where} took part in attention")
    used = ", ".join(t.text for t in result.used_tokens())
    raise DataError(f"{word!r} is not among the words of {where}" + (f" (in vocabulary: {used})" if listing else ""))


def compare_document(
    results: list[Contextualized],
    word: str | None,
    engine: ContextEngine,
    vectors: dict,
    *,
    window: int = 0,
    spelled: Sequence[str] | None = None,
) -> dict:
    """A word's static and contextual cosines across sentences, and its cosines at each layer
    (``layers``: the attention input h0, then each layer's output; a subword model's word is the mean
    of its pieces there too, as in its read-out). ``word`` may name an occurrence
    (``bank#2``) or a position (``#8``), the same in every sentence; without it, every shared word
    (its first occurrence), and the top level's ``word`` and matrices are None: ``summary`` gives each
    word's mean cosine over the sentence pairs, ``words`` its matrices. Sentences cropped to a
    ``window`` around the word (:func:`ctxembed.engine.crop`) give ``spelled``: per sentence, how
    ``word`` names the same token in its cropped text."""
    sentences = [r.prepared.text for r in results]
    shared = shared_words(results)
    spellings = list(spelled or [word] * len(results))  # how ``word`` names its token in each sentence
    if word is not None:
        for number, (result, spelling) in enumerate(zip(results, spellings, strict=True), start=1):
            if result.prepared.locate(spelling) is None:
                known = ", ".join(shared) if shared else "none"
                try:
                    locate_word(result, spelling, f"sentence {number} ({result.prepared.text!r})", listing=False)
                except DataError as exc:
                    raise DataError(f"{exc.message}; words shared by all sentences: {known}") from None
        words = [word]
    else:
        if not shared:
            raise DataError("the sentences share no word in the vocabulary; pass {word}", "word")
        words = shared
    hidden = [r.hidden_states() for r in results]  # per sentence: L + 1 arrays (T, d_l)
    entries = []
    for w in words:
        # (row, occurrence, occurrences) per sentence
        names = spellings if word is not None else [w] * len(results)  # every shared word: itself
        found = [r.prepared.locate(s) for r, s in zip(results, names, strict=True)]
        rows = [f[0] for f in found]
        static = np.stack([r.static[i] for r, i in zip(results, rows, strict=True)])  # (N, d)
        contextual = np.stack([r.contextual[i] for r, i in zip(results, rows, strict=True)])  # (N, d')
        at_layers = [  # per layer l: (N, d_l) the word's vector in each sentence
            np.stack([states[layer][i] for states, i in zip(hidden, rows, strict=True)])
            for layer in range(len(hidden[0]))
        ]
        tokens = [r.used_tokens()[i] for r, i in zip(results, rows, strict=True)]
        same_sense = engine.same_sense(at_layers)  # (N, N), or None: only a derived model has a head
        entries.append(
            {
                "word": w,
                "positions": [t.position for t in tokens],
                "occurrences": [{"occurrence": f[1], "of": f[2]} for f in found],
                "sources": [r.prepared.sources()[t.position] for r, t in zip(results, tokens, strict=True)],
                "static_similarity": cosine_matrix(static.astype(np.float64)),
                "contextual_similarity": cosine_matrix(contextual.astype(np.float64)),
                "layers": [cosine_matrix(layer.astype(np.float64)) for layer in at_layers],  # (L + 1) x (N, N)
            }
            | ({} if same_sense is None else {"same_sense": same_sense.astype(np.float64)})
        )
    # the top level speaks of one word only when one was asked for; every shared word is in "words"
    given = entries[0] if word is not None else None
    pairs = np.triu_indices(len(results), k=1)  # each pair of sentences once
    return {
        "schema": "ctxembed.compare/5",
        "vectors": vectors,
        **settings_block(engine, window=window),
        "sentences": sentences,
        "skipped": [skipped_records(r) for r in results],
        "word": given and given["word"],
        "static_similarity": given and given["static_similarity"],
        "contextual_similarity": given and given["contextual_similarity"],
        "layers": given and given["layers"],
        "summary": [
            {
                "word": entry["word"],
                "static_mean": float(np.mean(entry["static_similarity"][pairs])),
                "contextual_mean": float(np.mean(entry["contextual_similarity"][pairs])),
                "contextual_lowest": float(np.min(entry["contextual_similarity"][pairs])),
            }
            for entry in entries
        ],
        "words": entries,
        "warnings": sentence_warnings(results)
        + [
            f"sentence {number}: {line}" if len(results) > 1 else line
            for number, result in enumerate(results, start=1)
            if word is not None and (line := twins_warning(result, word))
        ],
    }


def neighbors_document(
    engine: Engine,
    result: Contextualized,
    word: str,
    k: int,
    vectors: dict,
    *,
    include_context: bool = default("include_context"),
    among: int | None = NEIGHBOURS_AMONG,
    space: str | None = None,
    window: int = 0,
) -> dict:
    """Nearest words of a word's static and contextual vectors (``window``: the tokens either side of
    the word the sentence was cropped to, said in the settings; 0: none). The sentence's own words are left
    out of both lists unless ``include_context``: the contextual vector leans towards its context,
    and its neighbours should say what the word means here, not repeat the sentence. ``among``: only
    the most frequent words are candidates (None or 0: the whole vocabulary)."""
    row, occurrence, occurrences = locate_word(result, word, "the sentence")
    token = result.used_tokens()[row]
    contextual = result.contextual[row]
    if not np.any(contextual):
        raise DataError(
            f"the contextual vector of {word!r} is zero (nothing to attend to and no residual): no neighbours"
        )
    if contextual.shape[0] != engine.dim:
        raise DataError(
            f"contextual vectors have {contextual.shape[0]} dimensions, the vocabulary {engine.dim}: "
            "neighbours need {projection} identity, or {output_projection}",
            "projection",
            "output_projection",
        )
    context = [] if include_context else [t.key for t in result.used_tokens() if t.key != token.key]
    excluded = list(dict.fromkeys(context))  # the sentence's words, once each, in order
    exclude = {token.key, *excluded}
    # static vectors against the store as is; contextual ones against the vocabulary after
    # all-but-the-top removal, the space the attention inputs (and so the outputs) live in
    among = min(among, len(engine.store)) if among else len(engine.store)
    static_list = nearest(engine.store, result.static[row], k=k, exclude=exclude, among=among)
    space = check_space(engine, space)
    searched, forms = None, []
    if space == "contextual":
        from ctxembed.engine.space import hidden_states, open_space, word_forms  # lazy: only this search reads it

        found = open_space(engine)
        forms = [] if include_context else word_forms(token.key, found.words)
        states = hidden_states(result, row)  # (K, D) the word's hidden states, compared state by state
        contextual_list = found.neighbours(states, engine.mix, word=token.key, k=k, exclude=exclude | set(forms))
        searched = found.describe_neighbours(engine.mix)
    else:
        contextual_list = nearest(engine.store, contextual, k=k, exclude=exclude, removal=engine.removal, among=among)
    return {
        "schema": "ctxembed.neighbors/3",
        "vectors": vectors,
        **settings_block(engine, window=window),
        "text": result.prepared.text,
        "word": token.key,
        "position": token.position,
        "occurrence": occurrence,
        "occurrences": occurrences,
        "source": result.prepared.sources()[token.position],
        "skipped": skipped_records(result),
        "static_contextual_cosine": cosine(result.inputs[row], contextual)
        if result.inputs.shape[1] == contextual.shape[0]
        else None,
        "space": space_label(engine, space, searched),
        **({"search": searched, "forms": forms} if searched else {}),
        "excluded": excluded,
        "among": among,
        "static": [{"word": w, "similarity": s} for w, s in static_list],
        "contextual": [{"word": w, "similarity": s} for w, s in contextual_list],
        "warnings": sentence_warnings([result]) + [line for line in [twins_warning(result, word)] if line],
    }


def check_space(engine, space: str | None) -> str:
    """The neighbour space a search uses: ``space``, or the engine's first (its default); a SettingError
    for a space the engine has none of."""
    if space is None:
        return engine.card.spaces[0]
    if space not in engine.card.spaces:
        raise SettingError(
            f"{{space}} {space}: model {engine.card.name} searches {' or '.join(engine.card.spaces)}", "space"
        )
    return space


def space_label(engine, space: str, searched: dict | None) -> str:
    """How a document names the space its contextual list was searched in (``searched``: the contextual
    search's record, :meth:`NeighbourSpace.describe_neighbours`)."""
    if space == "contextual":
        compared = searched["compared"]  # the states the search compared, as its record names them
        return f"contextual: each word's mean hidden states over Brown, compared state by state ({compared})"
    if space == "input" and engine.card.spaces[0] != "input":
        return "input embeddings"
    return "after the shared projection" if engine.removal is not None else "static"


def explain_steps(
    engine: ContextEngine, result: Contextualized, *, layer: int, head: int, query: int | None = None
) -> dict:
    """The --explain document: every step of one layer and head, as the engine traced it
    (:meth:`ContextEngine.layer_trace`: the steps the result was computed with), labelled with the
    units the model attends over (words, or pieces with [CLS] and [SEP]). ``query`` (a word's row) adds
    ``neuron``: that word's query unit's q . k_j with every key, term by term
    (:func:`ctxembed.core.readings.score_terms`)."""
    trace = engine.layer_trace(result, layer)
    a = trace.attention
    s = trace.steps
    steps = s.attention
    n = len(trace.units)
    allowed = np.ones((n, n), dtype=bool) if steps.allowed is None else np.broadcast_to(steps.allowed, (1, n, n))[0]
    if a.causal and a.causal_mode == "before":  # "after" normalises over the future, then zeroes it
        allowed = allowed & build_mask(n, causal=True)[0, 0]  # (T, T)
    masked = ~allowed  # (T, T) keys the normaliser could not use
    scores = steps.scores[head]  # (T, T)
    explained = {
        "layer": layer,
        "head": head,
        "heads": a.heads,
        "last_layer": layer == a.layers - 1,
        "level": trace.level,
        "notes": list(trace.notes),
        "tokens": trace.units,
        "sources": trace.sources,  # per row: its vector's source
        "inputs": s.inputs,  # (T, d_l)
        "inputs_about": trace.inputs_about,
        "positions": trace.positions,
        "shared_projection": trace.shared_projection,
        "projected": trace.projected,
        "projections": trace.projections,
        "biases": trace.biases,
        "queries": s.q[head],
        "keys": s.k[head],
        "values": s.v[head],
        "raw_scores": steps.raw_scores[head],
        "divisor": steps.divisor,
        "scaled_scores": steps.scaled_scores[head],
        "key_bias": steps.key_bias,
        "scores": np.where(masked, np.nan, scores),  # masked keys: null in JSON
        "normalization": a.normalization,
        "exclude_self": a.exclude_self,
        "exclude_twins": a.exclude_twins,
        "causal": a.causal,
        "causal_mode": a.causal_mode,
        "weights": steps.weights[head],
        "context": steps.context[head],
        "residual": a.residual,
        "residual_scale": a.residual_scale,
        "layer_norm": a.layer_norm,
        "output_projection": trace.output_projection,
        "attended": trace.attended,  # (T, d) or None: after attention's residual and norm, the feed-forward's input
        "output": s.output,
        "mix": _mix_step(result) if layer == a.layers - 1 else None,
        "neuron": None if query is None else _neuron(result, trace, head, query),
    }
    explained["steps"] = named_steps(explained, trace.after_attention)  # each step's name, and what to draw
    return explained


def _neuron(result: Contextualized, trace: LayerTrace, head: int, row: int) -> dict:
    """A word's scores term by term, from the traced q (T, d_k) and k (T, d_k) of a head: its query unit
    (the word itself, or its first piece) against every key unit."""
    unit = trace.query_units[row]
    queries, keys = trace.steps.q[head], trace.steps.k[head]  # (T, d_k) each
    return {
        "query": unit,
        "token": trace.units[unit],
        "word": result.used_tokens()[row].text,
        "q": queries[unit],  # (d_k,)
        "terms": score_terms(queries[unit], keys),  # (T, d_k); row j sums to raw_scores[query][j]
    }


def _mix_step(result: Contextualized) -> dict | None:
    """The last step when a layer mix is on: contextual = γ·Σ s_j h_j, h0 the attention input."""
    if result.mix is None:
        return None
    return {
        "formula": result.mix.formula(),
        "tokens": [t.text for t in result.used_tokens()],  # its rows are words, whatever units the layer had
        "weights": [float(w) for w in result.mix.weights],
        "gamma": result.mix.gamma,
        "contextual": result.contextual,  # (T, d)
    }


def side_by_side_entry(
    model: str, preset: str, engine: ContextEngine, results: list[Contextualized], word: str, vectors: dict
) -> dict:
    """One model's column of the side-by-side document: the first sentence's attention (last layer,
    mean of heads; the word's row), the word's cosine to every word of that sentence, and across the
    sentences its static and contextual cosines (with two sentences or more)."""
    first = results[0]
    row, _, _ = locate_word(first, word, "sentence 1")
    attention = mean_over_heads(first.weights[-1])  # (h, T, T) -> (T, T) the last layer
    contextual = first.contextual.astype(np.float64)  # (T, d_out)
    across = None
    if len(results) > 1:
        entry = compare_document(results, word, engine, vectors)["words"][0]
        across = {k: entry[k] for k in ("positions", "static_similarity", "contextual_similarity")}
    return {
        "model": model,
        "preset": preset,
        "vectors": vectors,
        "settings_summary": engine.summary(),
        "tokens": [t.text for t in first.used_tokens()],
        "attended_positions": list(first.prepared.used),
        "row": row,
        "position": first.prepared.used[row],
        "attention": attention,  # (T, T)
        "word_attention": attention[row],  # (T,) what the word attends to
        "word_cosines": cosine_matrix(contextual)[row],  # (T,) the word's contextual cosine to each word
        "across": across,
    }


def side_by_side_document(sentences: list[str], word: str, entries: list[dict], missing: list[dict]) -> dict:
    """The ``ctxembed.side-by-side/1`` document: the same sentences and word under several models."""
    return {
        "schema": "ctxembed.side-by-side/1",
        "sentences": sentences,
        "word": word,
        "models": entries,
        "missing": missing,  # views that could not be opened (a model not installed), each with why
    }
