"""The trained engine behind the contract, registered as "minilm": all-MiniLM-L6-v2 in NumPy.

    engine = open_engine(model="minilm")                       # after `ctxembed models install minilm`
    [result] = engine.run([engine.prepare("I deposited money in the bank")])
    result.weights.shape                                       # (6, 12, T, T) over ctxembed's T words

text -> ctxembed's words (:mod:`ctxembed.vectors.tokenize`) and BERT's pieces of the whole text
(:mod:`ctxembed.vectors.wordpiece`, each piece given to the word that holds it) -> [CLS] pieces [SEP]
-> :func:`ctxembed.core.encoder.encode` (sentences sorted by length, padded in groups, one BLAS thread)
-> back to words (:mod:`ctxembed.core.pieces`): a word's vector is the mean of its pieces, its attention
the sum over key pieces and the mean over query pieces, [CLS] and [SEP] hidden and each row renormalised
over the words. ``static`` is the model's input (layer 0: embeddings + positions + LayerNorm);
``contextual`` is the read-out, the mean of the 7 hidden states (h0 ... h6), the best of the read-outs
measured on SCWS dev (docs/models.md); ``layers()`` gives every hidden state. Neighbours are searched
among the model's whole-word input embeddings (words.ctxv, written at install).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from ctxembed.core.attention import AttentionConfig
from ctxembed.core.encoder import encode, trace_layer
from ctxembed.core.mix import LayerMix
from ctxembed.core.pieces import hidden_share, word_attention, word_vectors
from ctxembed.core.readings import sent_vectors
from ctxembed.declarations import DEFAULT_MAX_TOKENS
from ctxembed.engine.contract import WORDPIECES, Masks, ModelCard
from ctxembed.engine.sentence import NO_STEPS, AttentionParts, Contextualized, LayerTrace, Prepared
from ctxembed.errors import DataError
from ctxembed.presets import PRESETS, Settings
from ctxembed.vectors.mixfiles import resolve_mix
from ctxembed.vectors.models import NEIGHBOURS, load_encoder, model_path
from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.tokenize import pretokenized, tokenize
from ctxembed.vectors.wordpiece import WordPiece, pieces_to_words

GROUP_PIECES = 4096  # pieces a group holds at most (B * T): its (L, B, H, T, T) weights stay small
HIDDEN = "[CLS] and [SEP] hidden: each word's attention renormalised over the words"
UNKNOWN = "[UNK]"  # the piece of a word the vocabulary cannot spell


@dataclass(slots=True)
class PiecedSentence(Prepared):
    """A prepared sentence with BERT's pieces: ids (P,) with [CLS] and [SEP], and each piece's row
    into ``used`` (-1: [CLS], [SEP])."""

    piece_ids: np.ndarray | None = None  # (P,) int64
    piece_texts: list[str] | None = None  # (P,)
    owner: np.ndarray | None = None  # (P,) row into used, -1 for the special pieces

    def sources(self) -> list[str]:
        """Per token: "vocabulary" for a word that is one piece of the model's vocabulary, "pieces" for
        a word split into several (its vector the mean of theirs), "unknown" for a word read as [UNK],
        "none" for a token that gives no piece."""
        counts = np.bincount(self.owner[self.owner >= 0], minlength=len(self.used))  # (W,) pieces per word
        unknown = {int(o) for o, text in zip(self.owner, self.piece_texts, strict=True) if text == UNKNOWN}
        found = ["none"] * len(self.texts)
        for row, position in enumerate(self.used):
            found[position] = "unknown" if row in unknown else "vocabulary" if counts[row] == 1 else "pieces"
        return found


@dataclass
class PiecedResult(Contextualized):
    """A result with the piece level kept: what the words were aggregated from."""

    piece_weights: np.ndarray | None = None  # (L, h, P, P) attention over the pieces
    piece_hidden: np.ndarray | None = None  # (L + 1, P, D) every hidden state of every piece
    values: list[np.ndarray] | None = None  # with trace: per layer (h, P, d_h) the values


class MiniLMEngine:
    """all-MiniLM-L6-v2 (a 6-layer, 12-head, 384-wide BERT) behind the engine contract."""

    model = "minilm"
    removal = None  # no all-but-the-top: the model's own space
    columns = None  # no column kernel: batch runs prepare and run

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        label: Callable[[str], str] = str,
        settings: Settings | None = None,
    ):
        folder = model_path(self.model)
        try:
            self.config, self.weights = load_encoder(folder)  # a memory map, used as it is
            self.vocab = WordPiece.from_file(folder / "vocab.txt")
            self.store = VectorStore.open(folder / NEIGHBOURS)
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise DataError(
                f"{folder} is damaged ({reason}): reinstall with `ctxembed models install minilm`"
            ) from None
        self.max_tokens = max_tokens
        self.label = label
        self.dim = self.out_dim = self.config.hidden
        base = settings or replace(PRESETS["textbook"], preset=self.model)
        attention = replace(base.attention, layers=self.layers, heads=self.heads)
        self.settings: Settings = replace(base, attention=attention)
        # the read-out: the settings' mix when they name one (eval's NAME@N), else the mean of h0 ... hL
        self.mix = resolve_mix(base.mix, self.layers) if base.mix else None
        # the read-out in a summary: the settings' own mix as its formula (1·h3), else the mean, named short
        self.readout = f"mean of h0..h{self.layers}" if self.mix is None else self.mix.formula()
        self.mix = self.mix or LayerMix(
            np.full(self.layers + 1, 1 / (self.layers + 1)), 1.0, "mean of the hidden states"
        )

    @cached_property
    def card(self) -> ModelCard:
        return ModelCard(
            name=self.model,
            family="bert",
            layers=self.layers,
            heads=self.heads,
            dim=self.dim,
            out_dim=self.out_dim,
            units=WORDPIECES,
            masks=Masks(hidden=("[CLS]", "[SEP]"), about=HIDDEN),
            readout=self.mix.formula(),
            options=frozenset({"max_tokens"}),
            trained=True,
            upstream="sentence-transformers/all-MiniLM-L6-v2",
        )

    @property
    def layers(self) -> int:
        return self.config.layers

    @property
    def heads(self) -> int:
        return self.config.heads

    def describe(self) -> dict[str, Any]:
        return {
            "preset": self.settings.preset,  # the configuration's name: minilm, or eval's minilm@N
            "model": self.model,
            "upstream": "sentence-transformers/all-MiniLM-L6-v2",
            "layers": self.layers,
            "heads": self.heads,
            "dim": self.dim,
            "readout": self.mix.formula(),
            "words": "a word's vector: the mean of its pieces; "
            "its attention: sum over key pieces, mean over query pieces",
            "hidden": HIDDEN,
        }

    def summary(self) -> str:
        shape = f"{self.layers} layers x {self.heads} heads"
        # each part fits an 80-column line after the views' "settings " prefix (they break between parts)
        hidden = "[CLS], [SEP] hidden (rows renormalised over the words)"
        return f"model minilm (all-MiniLM-L6-v2, {shape}) | read-out {self.readout} | {hidden}"

    # ------------------------------------------------------------------ sentence -> words and pieces

    def prepare(self, text: str, *, words: Sequence[str] | None = None) -> PiecedSentence:
        if words is not None:
            tokens = pretokenized(words)
            text = " ".join(words)
            starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
            spans = [(s, s + len(w)) for s, w in zip(starts, words, strict=True)]
        else:
            tokens = tokenize(text)
            spans = [(t.start, t.end) for t in tokens]
        if not tokens:
            raise DataError("the sentence has no words")
        pieces = self.vocab.encode(text)
        holder = pieces_to_words(pieces, spans)  # (P,) token position per piece
        used = sorted({int(h) for h in holder if h >= 0})
        if not used:
            raise DataError("no word of the sentence gives a word piece")
        if len(used) > self.max_tokens:
            raise DataError(f"{len(used)} words: at most {{max_tokens}} {self.max_tokens}", "max_tokens")
        if len(pieces) + 2 > self.config.max_positions:
            raise DataError(f"{len(pieces)} word pieces: the model takes at most {self.config.max_positions - 2}")
        row_of = {position: row for row, position in enumerate(used)}
        owner = np.array([-1, *(row_of.get(int(h), -1) for h in holder), -1], dtype=np.int64)  # (P,)
        ids = np.array([self.vocab.cls_id, *(p.id for p in pieces), self.vocab.sep_id], dtype=np.int64)  # (P,)
        single = {
            row: [p.text for p, o in zip(pieces, owner[1:-1], strict=True) if o == row] for row in range(len(used))
        }
        # find: a binary search of the store's sorted words, so one sentence does not build the word -> row dict
        found = [self.store.find(single[r][0]) if len(single[r]) == 1 else None for r in range(len(used))]
        rows = [-1 if row is None else row for row in found]
        texts = [t.text for t in tokens]
        keys = [t.key for t in tokens]
        in_vocab = [t.position in row_of for t in tokens]
        sentence = PiecedSentence(
            text,
            texts,
            keys,
            in_vocab,
            used,
            rows,
            [None] * len(tokens),
            {},
            self.store,
            piece_ids=ids,
            piece_texts=["[CLS]", *(p.text for p in pieces), "[SEP]"],
            owner=owner,
        )
        if words is not None:
            sentence._tokens = tokens
        return sentence

    # ------------------------------------------------------------------ pieces -> encoder -> words

    def run(self, sentences: Sequence[Prepared], *, weights: bool = True, trace: bool = False) -> list[PiecedResult]:
        """Every sentence through the encoder, in groups of one length in pieces; results in input order.

        A group holds no padding: with padding, a sentence's sums (the softmax's, the weighted values')
        ran over its neighbours' length, and its numbers changed in the last bits with the sentences it
        ran with, so batch's records depended on its chunks (and Dask's partitions)."""
        from threadpoolctl import threadpool_limits  # one BLAS thread: faster per CPU-second, same sums each run

        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].piece_ids))
        results: list[PiecedResult | None] = [None] * len(sentences)
        with threadpool_limits(limits=1, user_api="blas"):
            start = 0
            while start < len(order):
                stop = start + 1
                P = len(sentences[order[start]].piece_ids)  # the group's one length, in pieces
                fits = (GROUP_PIECES // P) + start  # a group holds at most GROUP_PIECES pieces
                while stop < min(len(order), fits) and len(sentences[order[stop]].piece_ids) == P:
                    stop += 1
                group = [sentences[i] for i in order[start:stop]]
                for i, result in zip(order[start:stop], self._run_group(group, weights, trace), strict=True):
                    results[i] = result
                start = stop
        return results

    def _run_group(self, group: Sequence[PiecedSentence], weights: bool, trace: bool) -> list[PiecedResult]:
        T = max(len(s.piece_ids) for s in group)
        ids = np.zeros((len(group), T), dtype=np.int64)  # (B, T) [PAD] is id 0
        real = np.zeros((len(group), T), dtype=bool)  # (B, T)
        for b, s in enumerate(group):
            ids[b, : len(s.piece_ids)] = s.piece_ids
            real[b, : len(s.piece_ids)] = True
        out = encode(self.weights, ids, real, keep_values=trace)  # hidden (L+1, B, T, D), weights (L, B, H, T, T)
        return [self._to_words(s, out, b, weights) for b, s in enumerate(group)]

    def _to_words(self, sentence: PiecedSentence, out, b: int, weights: bool) -> PiecedResult:
        """One sentence of a group's output, as words. What the result keeps is copied out of the group's
        arrays (a view would keep the whole group's (L, B, H, T, T) weights alive with it); without
        ``weights`` it keeps no weights and no piece level, only the word vectors."""
        P, W = len(sentence.piece_ids), len(sentence.used)
        hidden = out.hidden[:, b, :P]  # (L+1, P, D) a view into the group's
        layers = word_vectors(hidden, sentence.owner, W)  # (L+1, W, D) a new array
        piece_weights = out.weights[:, b, :, :P, :P].copy() if weights else None  # (L, H, P, P)
        word_weights = (
            None if piece_weights is None else word_attention(piece_weights, sentence.owner, W, renormalise=True)
        )
        return PiecedResult(
            prepared=sentence,
            static=layers[0],  # (W, D) the model's input
            inputs=layers[0],
            contextual=self.mix.apply(layers),  # (W, D) mean of the hidden states
            weights=word_weights,  # (L, H, W, W)
            layer_inputs=list(layers[:-1]),  # L arrays (W, D): each layer's input
            top=layers[-1],  # (W, D)
            mix=self.mix,
            piece_weights=piece_weights,
            piece_hidden=hidden.copy() if weights else None,
            values=None if out.values is None else [v[b, :, :P].copy() for v in out.values],  # L x (H, P, d_h)
            hidden_share=None if piece_weights is None else hidden_share(piece_weights, sentence.owner, W),
            hidden_units=("[CLS]", "[SEP]"),
        )

    def attention_parts(self, result: PiecedResult) -> AttentionParts:
        """The piece-level weights and what each piece sends through each head (v W_o per head), with the
        engine's own aggregation to words, so readings are computed on the pieces and aggregated after."""
        sent = None
        if result.values is not None:
            sent = [sent_vectors(v, layer.W_o) for v, layer in zip(result.values, self.weights.layers, strict=True)]
        owner, W = result.prepared.owner, len(result.prepared.used)
        return AttentionParts(result.piece_weights, sent, lambda maps: word_attention(maps, owner, W, renormalise=True))

    def layer_trace(self, result: PiecedResult, layer: int) -> LayerTrace:
        """Layer ``layer`` step by step over the pieces ([CLS] and [SEP] included), recomputed from the
        layer's input (the result's hidden state h_layer) by :func:`ctxembed.core.encoder.trace_layer`,
        the encoder's own functions on the same one-sentence batch: its weights equal the result's
        ``piece_weights[layer]``. A word's query in the neuron view is its first piece."""
        if result.piece_hidden is None:
            raise DataError(NO_STEPS, "explain")
        from threadpoolctl import threadpool_limits  # one BLAS thread, as run() computed it: the same sums

        with threadpool_limits(limits=1, user_api="blas"):
            steps = trace_layer(self.weights, layer, result.piece_hidden[layer])  # (P, D) -> q (H, P, d_h) ...
        owner = result.prepared.owner  # (P,) word row per piece, -1 for [CLS] and [SEP]
        first = [int(np.flatnonzero(owner == row)[0]) for row in range(len(result.prepared.used))]
        inputs = (
            "h0: word-piece embeddings + learned position embeddings + segment 0, then LayerNorm"
            if layer == 0
            else f"h{layer}: the output of layer {layer - 1}"
        )
        return LayerTrace(
            steps,
            # BERT's ingredients: scaled softmax, no mask but padding, residual and LayerNorm per sub-layer
            AttentionConfig(layers=self.layers, heads=self.heads, residual=True, layer_norm=True),
            units=list(result.prepared.piece_texts),
            sources=["vocabulary"] * len(owner),  # every piece is a row of the model's vocabulary
            query_units=first,
            level="pieces",
            projected=True,
            projections="W_q, W_k, W_v trained (all-MiniLM-L6-v2), each with a bias",
            biases=True,
            output_projection=True,
            inputs_about=inputs,
            attended=steps.attended,
            notes=(
                "rows are WordPiece pieces with [CLS] and [SEP], the units the model attends over; its "
                "word-level maps sum a word's key pieces and average its query pieces",
                "a word's query (--word) is its first piece",
            ),
        )


def open_minilm(vectors=None, preset: str = "default", **keywords: Any) -> MiniLMEngine:
    """The registry's opener: the vector source and preset belong to the glove model and are ignored."""
    return MiniLMEngine(
        max_tokens=keywords.get("max_tokens") or DEFAULT_MAX_TOKENS,
        label=keywords.get("label") or str,
        settings=keywords.get("settings"),
    )
