"""The one engine of every trained model (every family but ``attention``): a registry entry and its
family (:mod:`ctxembed.engine.families`) make it all-MiniLM-L6-v2, or any other model of the family.

    engine = open_engine(model="minilm")                       # after `ctxembed models install minilm`
    [result] = engine.run([engine.prepare("I deposited money in the bank")])
    result.weights.shape                                       # (6, 12, T, T) over ctxembed's T words

text -> ctxembed's words (:mod:`ctxembed.vectors.tokenize`) and the family's pieces of the whole text
(its :class:`ctxembed.vectors.pieces.PieceTokenizer`, each piece given to the word that holds it) ->
the family's special pieces around them ([CLS] pieces [SEP]) -> the block
(:func:`ctxembed.core.encoder.encode`; sentences sorted by length, padded in groups, one BLAS thread)
-> back to words (:mod:`ctxembed.core.pieces`): a word's vector is the mean of its pieces, its attention
the sum over key pieces and the mean over query pieces, the special pieces hidden and each row
renormalised over the words. ``static`` is the model's input (layer 0); ``contextual`` is the read-out,
by default the mean of every hidden state (h0 ... hL; for all-MiniLM-L6-v2 the best of the read-outs
measured on SCWS dev, docs/models.md); ``layers()`` gives every hidden state. Neighbours are searched
in the card's first space, the contextual one (:mod:`ctxembed.engine.space`: each word's mean hidden
states over Brown), or among the whole-word input embeddings (words.ctxv, written at install).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxembed.budget import check_piece_weights, check_pieces, group_size
from ctxembed.core.attention import AttentionConfig
from ctxembed.core.mix import LayerMix
from ctxembed.core.pieces import hidden_share, word_attention, word_vectors
from ctxembed.core.readings import sent_vectors
from ctxembed.declarations import DEFAULT_MAX_TOKENS, ReadOptions
from ctxembed.engine.contract import WORDPIECES, Masks, ModelCard
from ctxembed.engine.projections import layer_mix
from ctxembed.engine.readout import read_out_at
from ctxembed.engine.sentence import NO_STEPS, AttentionParts, Contextualized, LayerTrace, Prepared
from ctxembed.errors import DataError
from ctxembed.presets import PRESETS, Settings
from ctxembed.vectors.integrity import check_finite, open_store
from ctxembed.vectors.models import NEIGHBOURS, install_command, model_path
from ctxembed.vectors.pieces import pieces_to_words
from ctxembed.vectors.tokenize import pretokenized, tokenize

if TYPE_CHECKING:
    from ctxembed.engine.families import Family
    from ctxembed.vectors.catalogue import ModelEntry

GROUP_PIECES = 4096  # pieces a group holds at most (B * T): its (L, B, H, T, T) weights stay small
WORDS_FROM_PIECES = (
    "a word's vector: the mean of its pieces; its attention: sum over key pieces, mean over query pieces"
)


@dataclass(slots=True)
class PiecedSentence(Prepared):
    """A prepared sentence with the model's pieces: ids (P,) with the special pieces, and each piece's
    row into ``used`` (-1: a special piece)."""

    piece_ids: np.ndarray | None = None  # (P,) int64
    piece_texts: list[str] | None = None  # (P,)
    owner: np.ndarray | None = None  # (P,) row into used, -1 for the special pieces
    unknown: str = "[UNK]"  # the tokenizer's piece for what it cannot spell

    def units(self) -> int:
        """What attention runs over: the pieces, special ones included (the cost budget counts these)."""
        return len(self.piece_ids)

    def sources(self) -> list[str]:
        """Per token: "vocabulary" for a word that is one piece of the model's vocabulary, "pieces" for
        a word split into several (its vector the mean of theirs), "unknown" for a word read as [UNK],
        "none" for a token that gives no piece."""
        counts = np.bincount(self.owner[self.owner >= 0], minlength=len(self.used))  # (W,) pieces per word
        unknown = {int(o) for o, text in zip(self.owner, self.piece_texts, strict=True) if text == self.unknown}
        found = ["none"] * len(self.texts)
        for row, position in enumerate(self.used):
            found[position] = "unknown" if row in unknown else "vocabulary" if counts[row] == 1 else "pieces"
        return found

    def pieces(self) -> list[list[str] | None]:
        """Per token, its pieces when the model split it into several (``overdraft``: over ##dra ##ft)."""
        rows: list[list[str]] = [[] for _ in self.used]
        for text, row in zip(self.piece_texts, self.owner, strict=True):
            if row >= 0:  # the special pieces belong to no word
                rows[row].append(text)
        found: list[list[str] | None] = [None] * len(self.texts)
        for row, position in enumerate(self.used):
            found[position] = rows[row] if len(rows[row]) > 1 else None
        return found


@dataclass
class PiecedResult(Contextualized):
    """A result with the piece level kept: what the words were aggregated from."""

    piece_weights: np.ndarray | None = None  # (L, h, P, P) attention over the pieces
    piece_hidden: np.ndarray | None = None  # (L + 1, P, D) every hidden state of every piece
    values: list[np.ndarray] | None = None  # with trace: per layer (h, P, d_h) the values


class TrainedEngine:
    """A trained model of the registry (its entry) behind the engine contract, run as its family says."""

    removal = None  # no all-but-the-top: the model's own space
    columns = None  # no column kernel: batch runs prepare and run

    def __init__(
        self,
        entry: ModelEntry,
        family: Family,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        label: Callable[[str], str] = str,
        settings: Settings | None = None,
        readout_layer: int | None = None,
        window: int | None = None,
    ):
        self.model, self.entry, self.family = entry.name, entry, family
        # how documents name it: its upstream model's own name (all-MiniLM-L6-v2), else its registry name
        self.upstream = entry.package.upstream if entry.package is not None else None
        self.title = self.upstream.rpartition("/")[2] if self.upstream else entry.name
        # a derived model's head (p(same sense), compare shows it) and learned read-out; None for others
        self.head = entry.derived["head"] if entry.derived is not None else None
        folder = model_path(entry.weights_of)  # a frozen derived model runs its parent's weights
        try:
            self.config, self.weights, self.tokenizer = family.load(folder)  # weights: a memory map, used as it is
            self.store = open_store(self.model, folder / NEIGHBOURS, self.config)  # errors name the reinstall
            self.special_ids = (
                [self.tokenizer.id_of(p) for p in family.begin],
                [self.tokenizer.id_of(p) for p in family.end],
            )
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise DataError(f"{folder} is damaged ({reason}): reinstall with `{install_command(self.model)}`") from None
        self.max_tokens = max_tokens
        # tokens read either side of a word whose vector a command reads (0: the whole sentence)
        self.window = entry.window if window is None else ReadOptions(window=window).window
        self.label = label
        self.dim = self.out_dim = self.config.hidden
        # the configuration it runs as: the model and its read-out (eval's NAME@N gives a mix), nothing else;
        # not part of the contract: what eval's ladder and Explorer.settings carry for this model
        self.settings: Settings = settings or replace(PRESETS["textbook"], preset=self.model, model=self.model)
        if readout_layer is not None:  # --model NAME@N: hidden state N alone, as eval's NAME@N
            self.settings = read_out_at(self.settings, self.model, readout_layer, self.layers)
        base = self.settings
        # the read-out: the settings' mix when they name one (eval's NAME@N), else the mean of h0 ... hL
        self.mix = layer_mix(base, self.dim, self.out_dim, self.layers) if base.mix else None
        if self.mix is None and entry.derived is not None:  # the read-out it was trained with
            learned = entry.derived["mix"]
            self.mix = LayerMix(np.array(learned["weights"]), float(learned["gamma"]), f"{self.model}'s own")
        # the read-out in a summary: the settings' own mix as its formula (1·h3), else the mean, named short
        self.readout = f"mean of h0..h{self.layers}" if self.mix is None else self.mix.formula()
        self.mix = self.mix or LayerMix(
            np.full(self.layers + 1, 1 / (self.layers + 1)), 1.0, "mean of the hidden states"
        )

    def same_sense(self, layers: Sequence[np.ndarray]) -> np.ndarray | None:
        """A derived model's head (:func:`ctxembed.core.heads.same_sense`): the word in N sentences at each
        hidden state, L + 1 arrays (N, D) -> (N, N) p(same sense) of each two; None without a head."""
        if self.head is None:
            return None
        from ctxembed.core.heads import same_sense

        words = np.stack(layers, axis=1)  # (N, L + 1, D)
        i, j = np.meshgrid(np.arange(len(words)), np.arange(len(words)), indexing="ij")  # (N, N) each
        p = same_sense(self.head, self.mix.weights, words[i.ravel()], words[j.ravel()])  # (N * N,)
        return p.reshape(len(words), len(words))

    @cached_property
    def card(self) -> ModelCard:
        return ModelCard(
            name=self.model,
            family=self.family.name,
            layers=self.layers,
            heads=self.heads,
            dim=self.dim,
            out_dim=self.out_dim,
            units=WORDPIECES,
            masks=Masks(causal=self.family.causal, hidden=self.family.specials, about=self._hidden),
            readout=self.mix.formula(),
            options=self.family.options,
            trained=True,
            upstream=self.upstream,
            spaces=("contextual", "input"),  # measured on data/ambiguous.tsv: docs/senses.md
            parent=self.entry.parent,
        )

    @property
    def _hidden(self) -> str:
        """What the word maps hide, for a document: the special pieces, each row renormalised ("": none)."""
        if not self.family.specials:
            return ""
        return f"{' and '.join(self.family.specials)} hidden: each word's attention renormalised over the words"

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
            "upstream": self.upstream,
            "layers": self.layers,
            "heads": self.heads,
            "dim": self.dim,
            "readout": self.mix.formula(),
            "words": WORDS_FROM_PIECES,
            "hidden": self._hidden,
        }

    def summary(self) -> str:
        shape = f"{self.layers} layers x {self.heads} heads"
        # each part fits an 80-column line after the views' "settings " prefix (they break between parts)
        specials = ", ".join(self.family.specials)
        hidden = f" | {specials} hidden (rows renormalised over the words)" if specials else ""
        return f"model {self.model} ({self.title}, {shape}) | read-out {self.readout}{hidden}"

    # ------------------------------------------------------------------ sentence -> words and pieces

    def prepare(self, text: str, *, words: Sequence[str] | None = None) -> PiecedSentence:
        room = self.config.max_positions - len(self.family.specials)  # pieces a sentence may have
        check_pieces(text if words is None else " ".join(words), room)  # measured before anything is cut
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
        pieces = self.tokenizer.encode(text)
        holder = pieces_to_words(pieces, spans)  # (P,) token position per piece
        used = sorted({int(h) for h in holder if h >= 0})
        if not used:
            raise DataError("no word of the sentence gives a word piece")
        if len(used) > self.max_tokens:
            raise DataError(f"{len(used)} words: at most {{max_tokens}} {self.max_tokens}", "max_tokens")
        if len(pieces) > room:
            raise DataError(f"{len(pieces)} word pieces: the model takes at most {room}")
        check_piece_weights(len(pieces) + len(self.family.specials), self.layers, self.heads)
        row_of = {position: row for row, position in enumerate(used)}
        begin, end = self.special_ids
        owner = np.array([*(-1 for _ in begin), *(row_of.get(int(h), -1) for h in holder), *(-1 for _ in end)])  # (P,)
        ids = np.array([*begin, *(p.id for p in pieces), *end], dtype=np.int64)  # (P,)
        own = owner[len(begin) : len(owner) - len(end)]  # (pieces,) the sentence's own pieces' words
        single = {row: [p.text for p, o in zip(pieces, own, strict=True) if o == row] for row in range(len(used))}
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
            piece_texts=[*self.family.begin, *(p.text for p in pieces), *self.family.end],
            owner=owner.astype(np.int64),
            unknown=self.tokenizer.unknown,
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
                fits = start + group_size(P, self.layers, self.heads, GROUP_PIECES // P)  # pieces and weights bounded
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
        out = self.family.encode(
            self.weights, ids, real, keep_values=trace
        )  # hidden (L+1, B, T, D), weights (L, B, H, T, T)
        # a damaged weight's NaN or infinity: refused, never shown
        check_finite(self.model, out.hidden, self.family.layout.weights)
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
            hidden_units=self.family.specials,
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
        """Layer ``layer`` step by step over the pieces (the special ones included), recomputed from the
        layer's input (the result's hidden state h_layer) by the family's traced block
        (:func:`ctxembed.core.encoder.trace_layer`), the block's own functions on the same one-sentence
        batch: its weights equal the result's ``piece_weights[layer]``. Named in the family's words.
        A word's query in the neuron view is its first piece."""
        if result.piece_hidden is None:
            raise DataError(NO_STEPS, "explain")
        from threadpoolctl import threadpool_limits  # one BLAS thread, as run() computed it: the same sums

        with threadpool_limits(limits=1, user_api="blas"):
            steps = self.family.trace(self.weights, layer, result.piece_hidden[layer])  # (P, D) -> q (H, P, d_h) ...
        owner = result.prepared.owner  # (P,) word row per piece, -1 for the special pieces
        first = [int(np.flatnonzero(owner == row)[0]) for row in range(len(result.prepared.used))]
        names = self.family.steps
        inputs = names.inputs if layer == 0 else names.later_inputs.format(layer=layer, previous=layer - 1)
        return LayerTrace(
            steps,
            # the block's ingredients: scaled softmax, its mask, residual and LayerNorm per sub-layer
            AttentionConfig(
                layers=self.layers, heads=self.heads, residual=True, layer_norm=True, causal=self.family.causal
            ),
            units=list(result.prepared.piece_texts),
            sources=["vocabulary"] * len(owner),  # every piece is a row of the model's vocabulary
            query_units=first,
            level="pieces",
            projected=True,
            projections=names.projections.format(upstream=self.title),
            biases=True,
            output_projection=True,
            inputs_about=inputs,
            attended=steps.attended,
            notes=(names.level.format(specials=" and ".join(self.family.specials)), names.query),
            after_attention=names.feed_forward,
        )
