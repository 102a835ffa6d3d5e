"""The first engine behind the contract (:mod:`ctxembed.engine.contract`), registered as "glove":
a store of static word vectors (GloVe by default, or any store ``--vectors`` opens) -> attention
layers whose projections come from the settings. No printing, no files.

    engine = Engine(store, build_settings("default"))
    sentence = engine.prepare("we sat on the river bank")           # tokens, vocabulary status
    [result] = engine.run([sentence])                                # attention over the tokens
    result.contextual[result.index_of("bank")]                       # (d,) the contextual "bank"

Data flows one way: text -> :mod:`tokenize` -> store rows -> all-but-the-top removal (if any)
-> :func:`ctxembed.core.attention.encode` -> :class:`Contextualized`. :meth:`Engine.run` groups
sentences of one length (:meth:`Engine.plan_groups`) and runs each group through one kernel,
:meth:`Engine.run_group`; batch calls the same kernel on its columns (:mod:`ctxembed.batch.columns`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cached_property
from os import PathLike
from typing import Any

import numpy as np

from ctxembed.budget import WEIGHTS_BUDGET, attention_weights
from ctxembed.core.attention import (
    encode,
    identity_params,
    input_positions,
    query_rows,
    sentence_twins,
    validate_params,
)
from ctxembed.core.projections import LayerParams
from ctxembed.core.readings import sent_vectors
from ctxembed.declarations import DEFAULT_MAX_TOKENS, AttentionConfig, ReadOptions
from ctxembed.engine.contract import LAST_LAYER, ModelCard
from ctxembed.engine.projections import (
    layer_mix,
    projection_parameters,
    projection_params,
    projections_text,
    resolve_settings,
    settings_card,
    top_removal,
)
from ctxembed.engine.sentence import NO_STEPS, AttentionParts, Contextualized, GroupArrays, LayerTrace, Prepared
from ctxembed.errors import DataError, SettingError
from ctxembed.output import say
from ctxembed.presets import Settings, fit_to_vectors
from ctxembed.vectors.catalogue import MODELS
from ctxembed.vectors.lexicon import Lexicon, too_many_tokens
from ctxembed.vectors.sources import open_vectors
from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.weights import check_trained_weights, weights_path

# Floats one group of sentences holds at once in each of its arrays (512 KB of float32): a group's
# (B, T, d) vectors stay in a core's cache between steps, and the memory of a chunk's attention is
# bounded whatever its sentences' lengths (a longer sentence runs alone). Batch's speed is flat from
# 2^15 to 2^20 (within 10%: benchmarks/probes/alternatives.py groups); a larger group only costs memory.
GROUP_FLOATS = 1 << 17
_EULER_GAMMA = 0.5772156649
FIND = "find"  # run_group's and run_rows' twins: found in the static vectors


MAX_MIXED = 1e15  # largest |value| of a mixed vector: its squared norm stays inside float32 (3.4e38)


def _non_finite(x: np.ndarray, *, masked: bool = False) -> bool:
    """True when ``x`` holds NaN or infinity; with ``masked``, -inf (a masked score) is allowed."""
    if masked:
        return bool(np.isnan(x).any() or np.isposinf(x).any())
    return not np.isfinite(x).all()


class Engine:
    """Static vectors + settings -> contextual vectors. Build once, run on many sentences.

    The "glove" model of :data:`ctxembed.engine.registry.MODELS`: it keeps the engine contract
    (:class:`ctxembed.engine.contract.ContextEngine`)."""

    model = "glove"

    def __init__(
        self,
        store: VectorStore,
        settings: Settings,
        *,
        oov: str = "skip",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        label: Callable[[str], str] = str,
        window: int | None = None,
    ):
        options = ReadOptions(oov=oov, max_tokens=max_tokens, window=window)
        if settings.weights_file and weights_path(settings.weights_file) != settings.weights_file:
            settings = replace(settings, weights_file=weights_path(settings.weights_file))  # the shipped file
        self.store = store
        self.settings = settings
        self.oov = options.oov
        self.max_tokens = options.max_tokens
        # tokens read either side of a word whose vector a command reads (0: the whole sentence)
        self.window = MODELS[self.model].window if options.window is None else options.window
        self.label = label  # how error messages name a setting (the CLI: by its flag)
        self.dim = store.dim
        self.lexicon = Lexicon(store, oov=self.oov)  # word -> pieces -> rows or subword vectors
        self.removal = top_removal(store, settings)  # all-but-the-top, or None
        check_trained_weights(settings, store)
        self.params = projection_params(settings, self.dim)
        try:
            self.out_dim = validate_params(
                self.params or identity_params(settings.attention), self.dim, settings.attention
            )
        except ValueError as exc:
            raise SettingError(str(exc)) from None
        self.mix = layer_mix(settings, self.dim, self.out_dim)  # None: the last layer alone
        # Zipf estimate of a word's probability from its frequency rank: p(r) = 1 / (r * H_N)
        self._harmonic = math.log(max(len(store), 1)) + _EULER_GAMMA

    @cached_property
    def card(self) -> ModelCard:
        readout = LAST_LAYER if self.mix is None else self.mix.formula()
        parameters = projection_parameters(self.params)
        return settings_card(self.settings, self.dim, self.out_dim, readout, parameters=parameters)

    @property
    def columns(self) -> Engine:
        """Batch's column kernel (:mod:`ctxembed.batch.columns`): this engine's own run_group and plan_groups."""
        return self

    @property
    def layers(self) -> int:
        return self.settings.attention.layers

    @property
    def heads(self) -> int:
        return self.settings.attention.heads

    def describe(self) -> dict[str, Any]:
        """The settings this engine runs with, as a document's ``settings`` holds them."""
        return self.settings.as_dict()

    def summary(self) -> str:
        """The settings in one line, as a document's ``settings_summary`` holds them."""
        return self.settings.summary()

    def same_sense(self, layers) -> None:
        """No head: the glove model is never trained on labelled pairs (a derived model's is)."""
        return None

    def attention_parts(self, result: Contextualized) -> AttentionParts:
        """The result's weights and, when traced, what each word sends through each head: its values
        times the head's rows of W_out (the heads' own slices without W_out). Words are the units."""
        sent = None
        if result.steps is not None:
            params = self.params or [None] * self.layers
            sent = [
                sent_vectors(step.v, None if layer is None else layer.W_out)  # (h, T, D)
                for step, layer in zip(result.steps, params, strict=True)
            ]
        return AttentionParts(result.weights, sent)

    def layer_trace(self, result: Contextualized, layer: int) -> LayerTrace:
        """The steps of ``layer`` for --explain: those the result was computed with (``run(trace=True)``),
        over its words, with what the settings switched on."""
        if result.steps is None:
            raise DataError(NO_STEPS, "explain")
        s, a = result.steps[layer], self.settings.attention
        n = len(result.prepared.used)
        return LayerTrace(
            s,
            a,
            units=[t.text for t in result.used_tokens()],
            sources=[result.prepared.sources()[p] for p in result.prepared.used],
            query_units=list(range(n)),
            projected=self.settings.projection != "identity",
            projections=projections_text(self.settings),
            output_projection=s.merged.shape[-1] != s.v.shape[0] * s.v.shape[-1] or self.settings.output_projection,
            positions=a.positions and layer == 0,
            shared_projection=self.settings.abtt > 0 and layer == 0,
        )

    # ------------------------------------------------------------------ sentences
    def prepare(self, text: str, *, words: Sequence[str] | None = None) -> Prepared:
        """Tokenise and look up a sentence (or pre-split ``words``); raise DataError when it is unusable.

        Tokenising stops as soon as more than ``max_tokens`` tokens would enter attention, so a huge
        line is refused without being tokenised whole."""
        texts, token_keys, in_vocab, keys, used, rows, extra, tokens = self.lexicon.sentence(
            text, words=words, max_tokens=self.max_tokens
        )
        if not texts:
            raise DataError("empty sentence: nothing to attend to")
        if self.oov == "error" and not all(in_vocab):
            missing = ", ".join(repr(t) for t, ok in zip(texts, in_vocab, strict=True) if not ok)
            raise DataError(f"out of vocabulary: {missing} ({{oov}} skip or zero to go on)", "oov")
        if not any(in_vocab):
            shown = " ".join(texts[:8]) + (" ..." if len(texts) > 8 else "")
            raise DataError(f"no token is in the vocabulary: {shown}")
        if len(used) > self.max_tokens:  # (the lexicon refuses these before their vectors are built)
            raise too_many_tokens(len(used), self.max_tokens)
        if not self.fits_weights_budget(len(used)):
            raise DataError(
                f"a sentence of {len(used)} tokens with {{layers}} {self.layers} and {{heads}} {self.heads} would "
                f"keep {self.weights_bytes(len(used)) / 2**20:,.0f} MB of attention weights; "
                f"the limit is {WEIGHTS_BUDGET / 2**20:,.0f} MB",
                "layers",
                "heads",
            )
        return Prepared(text, texts, token_keys, in_vocab, used, rows, keys, extra, self.store, tokens)

    def weights_bytes(self, lengths: int | np.ndarray) -> int | np.ndarray:
        """Bytes of float32 attention weights a sentence of ``lengths`` tokens keeps: L x h x T^2 x 4."""
        return attention_weights(self.layers, self.heads, lengths) * 4

    def fits_weights_budget(self, lengths: int | np.ndarray) -> bool | np.ndarray:
        """Whether a sentence of ``lengths`` tokens keeps at most WEIGHTS_BUDGET bytes of weights."""
        return self.weights_bytes(lengths) <= WEIGHTS_BUDGET

    def key_bias(self, ranks: np.ndarray) -> np.ndarray | None:
        """SIF: log(a / (a + p(w))) per key, with p from the Zipf estimate; 0 for words without a rank."""
        a = self.settings.sif
        if not a:
            return None
        p = np.where(ranks >= 0, 1.0 / ((np.maximum(ranks, 0) + 1) * self._harmonic), 0.0)  # (T,)
        return np.log(a / (a + p)).astype(np.float32)  # (T,) <= 0

    def project_inputs(self, static: np.ndarray) -> np.ndarray:
        """(..., d) static vectors -> attention inputs (all-but-the-top removal when on)."""
        return static if self.removal is None else self.removal(static)  # (..., d)

    def run(self, sentences: Sequence[Prepared], *, weights: bool = True, trace: bool = False) -> list[Contextualized]:
        """Attention over many sentences; one result per sentence, in order.

        Sentences run in groups of equal length (see :meth:`plan_groups`), so a sentence's numbers never
        depend on the sentences it runs with. ``weights=False`` keeps no attention weights; ``trace``
        keeps every intermediate step in ``result.steps`` (what --explain shows)."""
        results: list[Contextualized | None] = [None] * len(sentences)
        for members, group in self.groups(sentences, weights=weights, trace=trace):
            for i, result in zip(members, group, strict=True):
                results[i] = result
        return results

    def groups(self, sentences: Sequence[Prepared], *, weights: bool = True, trace: bool = False):
        """Yield (indices into sentences, their results) group by group, in the order of
        :meth:`plan_groups`: each group's static vectors (B, T, d) and key biases (B, T) through
        :meth:`run_group`, cut into one :class:`Contextualized` per sentence."""
        lengths = np.fromiter((len(s.used) for s in sentences), np.int64, len(sentences))  # (n,)
        for members in self.plan_groups(lengths, weights=weights):
            chosen = [sentences[i] for i in members.tolist()]
            static = np.stack([s.static for s in chosen])  # (B, T, d)
            bias = self.key_bias(np.stack([s.ranks for s in chosen]))  # (B, T) or None
            group = self.run_group(static, bias, weights=weights, trace=trace)
            yield members.tolist(), group.results(chosen, self.mix)

    def plan_groups(self, lengths: np.ndarray, *, weights: bool = True) -> list[np.ndarray]:
        """The groups sentences of these ``lengths`` (n,) run in: arrays of indices, shortest
        sentences first, in input order within a length; a length <= 0 is in no group.

        A group holds sentences of one length T, and at most GROUP_FLOATS floats in each array:
        layers x heads x T^2 per sentence when weights are kept, heads x T^2 (one layer's) when they
        are not, and T x d for its vectors. Without padding, a sentence's arithmetic is the same
        whatever it runs with."""
        order = np.argsort(lengths, kind="stable")  # (n,) by length, then in input order
        order = order[lengths[order] > 0]
        cuts = np.flatnonzero(np.diff(lengths[order])) + 1  # where the length changes
        groups: list[np.ndarray] = []
        for members in np.split(order, cuts) if len(order) else []:
            T = int(lengths[members[0]])
            # floats a sentence holds at once: its attention weights, or its (T, d) vectors if more
            per_sentence = T * max(self.heads * T * (self.layers if weights else 1), self.dim)
            size = max(1, GROUP_FLOATS // per_sentence)
            groups += [members[start : start + size] for start in range(0, len(members), size)]
        return groups

    def run_group(
        self,
        static: np.ndarray,
        bias: np.ndarray | None,
        *,
        weights: bool = True,
        vectors: bool = True,
        trace: bool = False,
        twins: np.ndarray | None | str = FIND,
    ) -> GroupArrays:
        """Attention over B sentences of one length T, from their static vectors (B, T, d) and key
        biases (B, T) or None, without padding: the kernel of :meth:`run` and of batch
        (:mod:`ctxembed.batch.columns`). ``vectors=False`` is for a caller that reads the weights
        alone: the last layer stops at its weights, and no contextual vector is made. ``twins``: the
        static vectors' :func:`sentence_twins` when the caller has them (batch finds a chunk's at once)."""
        vectors = vectors or trace
        inputs = self.project_inputs(static)  # (B, T, d)
        config = self.settings.attention
        twins = self._twins(static, twins)  # (B, T) copies of a word, or None
        if twins is None and config.exclude_twins:
            config = self._without_twins  # no sentence repeats a word: the twin mask would mask nothing
        with np.errstate(all="ignore"):  # a NaN or overflow is reported below, naming its stage, not warned
            result = encode(
                inputs,
                config,
                self.params,
                key_bias=bias,
                twins=twins,
                trace=trace,
                keep_weights=weights or not vectors,
                outputs=vectors,
            )
        # without outputs, finite inputs and weights bound every output: each is a weighted mean of inputs
        checked = result.contextual if vectors else inputs
        finite = np.isfinite(checked).all() and (result.weights is None or np.isfinite(result.weights).all())
        if not finite:
            stage = _bad_stage(inputs, config, self.params, twins, bias)
            raise DataError(f"the computation gave NaN or infinite values at {stage}")
        kept = None if not weights else np.ascontiguousarray(result.weights.swapaxes(0, 1))  # (B, L, h, T, T)
        if not vectors:
            return GroupArrays(static, inputs, None, kept, [], None, None)
        hidden_in = input_positions(inputs, self.settings.attention)[0]  # (B, T, d) the first layer's input
        layer_inputs = [hidden_in] + result.layer_outputs[:-1]  # L arrays (B, T, d_l)
        top, contextual = None, result.contextual  # (B, T, d_out)
        if self.mix is not None:  # h0 is the word itself: the input without positions
            layers = np.stack([inputs, *result.layer_outputs])  # (L + 1, B, T, d)
            with np.errstate(all="ignore"):
                top, contextual = contextual, self.mix.apply(layers)  # (B, T, d)
            if not np.isfinite(contextual).all() or np.abs(contextual).max(initial=0.0) > MAX_MIXED:
                raise DataError(
                    f"{{mix}} {self.mix.formula()} gives values past {MAX_MIXED:g}, whose "
                    "similarities cannot be computed: use a smaller gamma",
                    "mix",
                )
        return GroupArrays(static, inputs, contextual, kept, layer_inputs, top, result.steps)

    @property
    def runs_rows(self) -> bool:
        """Whether :meth:`run_rows` can give one token's vector per sentence: one layer of identity
        projections, not causal (what the default preset and the textbook ones are)."""
        a = self.settings.attention
        return a.layers == 1 and not a.causal and self.params is None

    def run_rows(
        self, static: np.ndarray, bias: np.ndarray | None, rows: np.ndarray, twins: np.ndarray | None | str = FIND
    ) -> np.ndarray | None:
        """The contextual vector of one token per sentence, for a caller that wants nothing else
        (batch --no-weights --word): static (B, T, d), key biases (B, T) or None, rows (B,) -> (B, d_out),
        ``run_group(static, bias).contextual[b, rows[b]]`` bit for bit (:func:`query_rows`: the same
        products, one row of the softmax). None when :meth:`runs_rows` is False, or when the group's
        vectors are so large that run_group might refuse it: then run_group says why.

        Bit for bit: tests/test_query_rows.py against encode, and tests/test_batch_columnar.py's
        --word records against the full path's on Brown lines. ``twins`` as in :meth:`run_group`."""
        if not self.runs_rows or not _surely_in_range(self, static):
            return None
        config = self.settings.attention
        inputs = self.project_inputs(static)  # (B, T, d) all-but-the-top: one product per sentence, as run_group
        twins = self._twins(static, twins)  # (B, T) or None, as run_group
        with np.errstate(all="ignore"):
            top = query_rows(inputs, config, identity_params(config)[0], rows, key_bias=bias, twins=twins)  # (B, d)
            if self.mix is None:
                return top
            h0 = inputs[np.arange(len(rows)), rows]  # (B, d) the word itself, as run_group's mix reads it
            return self.mix.apply(np.stack([h0, top]))  # (2, B, d) -> (B, d)

    def _twins(self, static: np.ndarray, twins: np.ndarray | None | str) -> np.ndarray | None:
        """The twin ids the attention settings ask for: ``twins`` as given, else found in ``static``."""
        if not self.settings.attention.exclude_twins:
            return None
        return sentence_twins(static) if isinstance(twins, str) else twins  # (B, T) or None

    @cached_property
    def _removal_reach(self) -> float:
        """How far all-but-the-top can move a vector beyond its own length: the mean's length (0 without it)."""
        return 0.0 if self.removal is None else float(np.linalg.norm(self.removal.mean))

    @cached_property
    def _without_twins(self) -> AttentionConfig:
        """The attention settings with the twin mask off: for groups where no sentence repeats a vector."""
        return replace(self.settings.attention, exclude_twins=False)


def _surely_in_range(engine: Engine, static: np.ndarray) -> bool:
    """Whether run_group on these static vectors (B, T, d) surely passes its checks (every number
    finite, the mix under MAX_MIXED), from a bound, so that run_rows, which computes one row,
    gives no record where run_group would have refused the group. One identity layer: an input
    is at most |x| + |mean| long (all-but-the-top projects), plus √d with positions; a score at
    most its square over the divisor; a softmax row mixes values, so a context is no longer than
    an input; residual, norm and the mix scale that."""
    a, d = engine.settings.attention, engine.dim
    top = max(float(static.max(initial=0.0)), -float(static.min(initial=0.0)))  # max |x| (NaN: not finite)
    largest = top * math.sqrt(d) + engine._removal_reach  # >= every row's length, after all-but-the-top
    if a.positions:
        largest += math.sqrt(d)
    largest = largest * 1.01 + 1e-3  # room for float32 rounding
    if not math.isfinite(largest) or largest**2 / (math.sqrt(d // a.heads) * a.temperature) > 1e36:
        return False
    out = largest * (1 + abs(a.residual_scale)) if a.residual else largest
    if a.layer_norm:
        out = math.sqrt(d)
    if engine.mix is not None:
        unit = 1.0 if engine.mix.normalize else max(largest, out)
        out = engine.mix.gamma * float(np.abs(engine.mix.weights).sum()) * unit
    return out < MAX_MIXED / 2


def _bad_stage(
    inputs: np.ndarray,
    config: AttentionConfig,
    params: list[LayerParams] | None,
    twins: np.ndarray | None,
    bias: np.ndarray | None,
) -> str:
    """The first step whose numbers are not all finite (only run after a failure): re-run traced."""
    if not np.isfinite(inputs).all():
        return "the input vectors (after all-but-the-top)"
    with np.errstate(all="ignore"):
        traced = encode(inputs, config, params, key_bias=bias, twins=twins, trace=True)
    for number, layer in enumerate(traced.steps):
        a = layer.attention
        for name, array in (
            ("the queries, keys and values", (layer.q, layer.k, layer.v)),
            ("the attention scores", (a.scores,)),
            ("the attention weights (normalisation)", (a.weights,)),
            ("the weighted sum of values", (a.context,)),
            ("the merged heads (output projection)", (layer.merged,)),
            ("the layer output (residual, layer norm)", (layer.output,)),
        ):
            if any(_non_finite(x, masked=name == "the attention scores") for x in array):
                return f"{name} of layer {number}"
    return "the contextual vectors"


def open_glove(
    vectors: str | PathLike | None = None,
    preset: str = "default",
    *,
    limit: int | None = None,
    trust: bool = False,
    oov: str = "skip",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    window: int | None = None,
    on_note: Callable[[str], None] | None = None,
    label: Callable[[str], str] = str,
    **settings: Any,
) -> Engine:
    """An engine for a vector source and settings (the keywords of :class:`ctxembed.Explorer`).

    Settings are checked before any file is read; preset ingredients the vectors are too small for
    are turned off with a note to ``on_note`` (default: stderr), as are notes about a conversion."""
    note = on_note or say
    requested = resolve_settings(preset, **settings)
    store = open_vectors(None if vectors is None else str(vectors), limit=limit, trust=trust, on_convert=note)
    given = frozenset(name for name, value in settings.items() if value is not None)
    fitted, turned_off = fit_to_vectors(requested, store.dim, len(store), keep=given)
    if turned_off:
        values = requested.values()
        listed = ", ".join(f"{label(name)} {values[name]}" for name in turned_off)
        note(
            f"note: the {requested.preset} preset's {listed} turned off: these vectors are too small for it "
            f"({store.dim} dimensions, {len(store):,} words)"
        )
    return Engine(store, fitted, oov=oov, max_tokens=max_tokens, label=label, window=window)
