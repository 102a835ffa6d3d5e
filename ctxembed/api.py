"""The Python API: an :class:`Explorer` turns sentences into results you can read, save and show.

>>> import ctxembed
>>> ex = ctxembed.Explorer(vectors="notes-toy", preset="notes")
>>> a = ex.attend("apple is the phone")
>>> [t["text"] for t in a.tokens]
['apple', 'is', 'the', 'phone']
>>> a.weights.shape  # (layers, heads, query, key)
(1, 1, 4, 4)
>>> a.to_dict()["schema"]
'ctxembed.attend/5'

Every setting is a keyword (``heads=2, causal=True``), named as in :mod:`ctxembed.presets`; the
command line is a thin layer over this module, so ``a.to_dict()`` is the ``--json`` document.
Results show themselves in Jupyter (``_repr_html_``) and in rich (``__rich__``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np
import orjson

from ctxembed.budget import TRACE_COST, check_cost
from ctxembed.declarations import DEFAULT_MAX_TOKENS, ReadOptions, check_view
from ctxembed.engine import Contextualized, Prepared, crop, open_engine, refuse_window
from ctxembed.errors import CtxembedError, UsageError
from ctxembed.options import OPTIONS, default
from ctxembed.output import as_json, dumps, say
from ctxembed.presets import Settings
from ctxembed.report import (
    attend_document,
    attention_reading,
    check_reading,
    check_specials,
    compare_document,
    explain_steps,
    locate_word,
    neighbors_document,
    side_by_side_document,
    side_by_side_entry,
    skipped_records,
    token_records,
)
from ctxembed.vectors.store import VectorStore

# The jobs and the views load on first use: this module is on every attend/compare/neighbors path
# (docs/architecture.md, "Why imports are lazy").
__all__ = ["AttendResult", "CompareResult", "Explorer", "NeighborsResult", "SideBySideResult", "side_by_side"]


def vectors_record(source: str, store: VectorStore) -> dict:
    """What the documents say about an engine's vectors: source, name, words, dim."""
    return {"source": source, "name": store.meta.get("name", store.path.name), "words": len(store), "dim": store.dim}


def side_by_side(
    sentences: str | Sequence[str],
    word: str,
    *,
    vectors: str | PathLike | None = None,
    on_note: Callable[[str], None] | None = None,
    open_view: Callable[[str, str], Any] | None = None,
) -> SideBySideResult:
    """The same sentence(s) and ``word`` under every view the model registry lists (GloVe with the
    default preset, GloVe with the learned projections, then each other registered model): the
    first sentence's attention, the word's cosines, and with several sentences its cosine across
    them. A model that cannot be opened (not installed) is left out with a note saying why; the
    ``ctxembed.side-by-side/1`` document lists it under ``missing``. ``vectors``: as :class:`Explorer`'s,
    for every view of a model that reads vectors (default: the shipped GloVe). ``open_view(model, preset)`` gives
    each view's engine (default: a new one from the registry; the server passes its cached ones)."""
    from ctxembed.engine.registry import model_options, side_by_side_views  # the registry names the views

    note = on_note or say
    texts = [sentences] if isinstance(sentences, str) else list(sentences)
    if not texts:
        raise UsageError("side-by-side needs a sentence")
    entries, missing = [], []
    for number, (model, preset) in enumerate(side_by_side_views()):
        try:
            reads = vectors if "vectors" in model_options(model) else None  # a trained model's words are its own
            engine = open_view(model, preset) if open_view else open_engine(reads, preset, model=model, on_note=note)
        except CtxembedError as exc:  # not installed, weights trained for other vectors: leave it out
            if number == 0:  # the first view, the textbook one, is the picture's reference
                raise
            missing.append({"model": model, "preset": preset, "reason": exc.message})
            note(f"side-by-side: {model} {preset} left out: {exc.message}")
            continue
        prepared = [engine.prepare(text) for text in texts]
        check_run_cost(engine, [p.units() for p in prepared])
        results = engine.run(prepared)
        record = vectors_record("default" if vectors is None else str(vectors), engine.store)
        entries.append(side_by_side_entry(model, preset, engine, results, word, record))
    return SideBySideResult(side_by_side_document(texts, word, entries, missing))


def check_run_cost(engine, lengths: list[int], *, trace: bool = False) -> None:
    """Refuse, before it starts, a run of ``engine`` over sentences of ``lengths`` units (words, or a trained
    model's pieces: :meth:`Prepared.units`) that would pass the cost budget
    (:class:`ctxembed.budget.CostBudget`): its weights (a trace's steps count many times), projections
    applied per token and layer outputs kept."""
    from ctxembed.engine.contract import WORDPIECES  # loaded with the engine: `--help` needs no contract

    card = engine.card
    heads, layers = card.heads, card.layers
    width = max(card.out_dim, card.dim)
    check_cost(
        lengths,
        copies=TRACE_COST if trace else 1,
        heads=heads,
        layers=layers,
        head_size=max(width // heads, 1),
        width=width,
        parameters=card.parameters,
        kept_layers=layers if trace or card.keeps_layers else 1,
        units="word pieces" if card.units == WORDPIECES else "tokens",
        settable=not card.trained,
    )


class Explorer:
    """Static vectors and settings, ready to make sentences contextual. Build once, use many times.

    ``vectors``: a vector file, a gensim-data name, ``"notes-toy"``, or None for the shipped GloVe
    vectors. ``preset``: a named recipe (``default``, ``textbook``, ``notes``); any setting given as a
    keyword overrides it. ``limit`` keeps the most frequent words; ``trust`` allows gensim's pickled
    files; ``oov`` and ``max_tokens`` decide how sentences are read, and ``window`` how much of a
    sentence the commands that read one word's vector read (the tokens either side of it; 0: all; None:
    the model's own, :attr:`ContextEngine.window`). Notes for people (a foreign file
    converted once, a preset ingredient the vectors are too small for) go to ``on_note``
    (default: stderr); ``label`` names a setting in notes and in batch error records (the CLI
    passes its flags).
    """

    def __init__(
        self,
        vectors: str | PathLike | None = None,
        preset: str = "default",
        *,
        limit: int | None = default("limit"),
        trust: bool = default("trust"),
        oov: str = "skip",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        window: int | None = None,
        on_note: Callable[[str], None] | None = None,
        label: Callable[[str], str] = str,
        model: str = default("model"),
        **settings: Any,
    ):
        self.source = str(vectors) if vectors is not None else "default"
        # the window asked for: eval reads it for every configuration, None leaving each its model's own
        self.window = window
        self._note = on_note or say
        self.engine = open_engine(
            vectors,
            preset,
            model=model,
            limit=limit,
            trust=trust,
            oov=oov,
            max_tokens=max_tokens,
            window=window,
            on_note=on_note,
            label=label,
            **settings,
        )
        self.store: VectorStore = self.engine.store
        self.settings: Settings = self.engine.settings

    def __repr__(self) -> str:
        return f"Explorer({self.source!r}, {self.engine.summary()!r})"

    @property
    def vectors(self) -> dict:
        """What the documents say about the vectors: source, name, words, dim."""
        return vectors_record(self.source, self.store)

    def contextualize(self, sentences: Sequence[str | Prepared], *, trace: bool = False) -> list[Contextualized]:
        """Attention over several sentences at once; one result per sentence, in order. ``trace`` keeps
        every intermediate step (``result.steps``, what --explain shows). A sentence may come prepared
        already (``explorer.engine.prepare(text)``), by a caller that looked at its words first."""
        engine = self.engine
        prepared = [engine.prepare(text) if isinstance(text, str) else text for text in sentences]
        check_run_cost(engine, [p.units() for p in prepared], trace=trace)
        return engine.run(prepared, trace=trace)

    def attend(
        self,
        text: str | Prepared,
        *,
        trace: bool = False,
        attention: str = default("attention"),
        top: int = default("top"),
        with_vectors: bool = default("with_vectors"),
    ) -> AttendResult:
        """The attention weights of one sentence and its static and contextual vectors (``trace``: keep
        every step for :func:`ctxembed.report.explain_steps`). ``attention``: a reading to add beside the
        raw weights, ``mean``, ``rollout`` or ``value-norm`` (see :mod:`ctxembed.core.readings`). Its
        document lists the ``top`` most-attended tokens per token, and the vectors if ``with_vectors``."""
        check_reading(attention)
        self.check_window(None, "attend")
        [result] = self.contextualize([text], trace=trace or attention == "value-norm")
        return AttendResult(self, result, top=top, with_vectors=with_vectors, attention=attention)

    def explain(
        self,
        text: str | Prepared,
        *,
        layer: int | None = default("layer"),
        head: int | None = default("head"),
        attention: str = default("attention"),
        word: str | None = default("word"),
        top: int = default("top"),
        with_vectors: bool = default("with_vectors"),
    ) -> AttendResult:
        """:meth:`attend` with every step kept; its document carries ``explain``, the steps of ``layer``
        (default: the last) and ``head`` (default 0) with their numbers: ``attend --explain --json``.
        ``word`` (``bank``, ``bank#2``, ``#5``) adds ``explain.neuron``: its q . k_j term by term. Under a
        subword model the steps' rows are its pieces with [CLS] and [SEP], and a word queries with its
        first piece (the engine's ``layer_trace``)."""
        card = self.engine.card
        check_view(card.layers, card.heads, layer, head)
        result = self.attend(text, trace=True, attention=attention, top=top, with_vectors=with_vectors)
        query = None if word is None else locate_word(result.result, word, "the sentence")[0]
        result.explained = (card.layers - 1 if layer is None else layer, head or 0, query)
        return result

    def compare(
        self, sentences: Sequence[str], word: str | None = default("word", "compare"), *, window: int | None = None
    ) -> CompareResult:
        """Static against contextual cosine of ``word`` (default: every shared word) across sentences, each
        read in the tokens at most ``window`` either side of the word (None: the explorer's; 0: whole)."""
        sentences = list(sentences)
        if len(sentences) < 2:
            raise UsageError(f"compare needs at least two sentences, got {len(sentences)}")
        window = self.check_window(word, "compare", window)
        cropped = [crop(text, word, window) for text in sentences]  # (text, how word names its token there)
        results = self.contextualize([text for text, _ in cropped])
        spelled = [spelling for _, spelling in cropped]
        return CompareResult(compare_document(results, word, self.engine, self.vectors, window=window, spelled=spelled))

    def check_window(self, word: str | None, command: str, window: int | None = None) -> int:
        """The window a command reading ``word``'s vector crops its sentences to (0: none): ``window`` (one
        call's), else the explorer's, else the model's own (:attr:`ContextEngine.window`). A window asked
        for where there is no word to crop around (``attend``, ``compare`` of every shared word) is
        refused: a SettingError, as is one out of its limits."""
        asked = self.window if window is None else ReadOptions(window=window).window
        if word is None:  # attend reads no word; compare of every shared word names none
            refuse_window(asked, command)
            return 0
        return self.engine.window if window is None else asked

    def neighbors(
        self,
        text: str,
        word: str,
        k: int = default("k"),
        *,
        include_context: bool = default("include_context"),
        among: int | None = default("among"),
        space: str | None = default("space"),
        window: int | None = None,
    ) -> NeighborsResult:
        """Nearest vocabulary words of ``word``'s contextual vector in ``text``, beside its static ones;
        the sentence's other words are left out of both lists unless ``include_context``. ``word`` may
        name an occurrence (``bank#2``) or a position (``#8``). ``among``: search the N most frequent
        words (default 50,000, words people know; 0: the whole vocabulary). ``space``: where the contextual
        list is searched, ``contextual`` (each word's mean contextual vector over Brown; a trained model's
        default) or ``input`` (the input embeddings). ``window``: as in :meth:`compare`."""
        among = default("among") if among is None else OPTIONS["among"].check(among)
        OPTIONS["k"].check(k)
        window = self.check_window(word, "neighbors", window)
        text, word = crop(text, word, window)
        [result] = self.contextualize([text])
        document = neighbors_document(
            self.engine, result, word, k, self.vectors, include_context=include_context, among=among, space=space,
            window=window,
        )  # fmt: skip
        return NeighborsResult(document)

    def senses(
        self,
        words: str | Sequence[str],
        corpus: str | PathLike | None = None,
        *,
        forms: Sequence[str] = (),
        exact: bool = False,
        **options: Any,
    ) -> dict:
        """The senses of ``words`` across ``corpus`` (a text file, ``.gz``, ``"-"`` for stdin; default:
        the shipped Brown sample): every occurrence, clustered, each sense labelled and shown in context.
        ``options``: ``k`` (None: chosen), ``k_max``, ``min_share``, ``max_occurrences``, ``sample_seed``,
        ``drop_own``, ``examples``, ``label_words`` (:class:`ctxembed.presets.SenseOptions`). Returns the
        ``ctxembed.senses/2`` document of ``ctxembed senses --json``; a word that cannot be clustered stays
        in it without senses, and the reason goes to ``on_note``."""
        from ctxembed.senses.run import senses  # senses only: scikit-learn behind it

        doc, problems = senses(
            self.engine, self.vectors, [words] if isinstance(words, str) else words, corpus,
            forms=forms, exact=exact, **options,
        )  # fmt: skip
        for problem in problems:
            self._note(problem)
        return as_json(doc)

    def evaluate_wic(
        self, directory: str | PathLike, *, tune_on: str = "train", configs: Sequence[str] | None = None
    ) -> dict:
        """Word-in-Context accuracy of each configuration (``configs``: names of the ingredient ladder, or
        ``"custom"`` for this explorer's settings; default: the whole ladder) on a WiC folder
        (``SPLIT.data.txt``, ``SPLIT.gold.txt``): the ``ctxembed.eval-wic/1`` document."""
        from ctxembed.evaluation import run  # the eval commands only

        return as_json(
            run.wic(self.store, self.settings, self.vectors, directory, tune_on=tune_on, configs=configs,
                    on_note=self._note, window=self.window)
        )  # fmt: skip

    def evaluate_senses(self, path: str | PathLike | None = None, *, configs: Sequence[str] | None = None) -> dict:
        """The polysemy suite (a ``word<TAB>sense<TAB>sentence`` file; default: the shipped one): the
        ``ctxembed.eval-senses/1`` document; ``configs`` as in :meth:`evaluate_wic`."""
        from ctxembed.evaluation import run  # the eval commands only

        return as_json(run.senses(self.store, self.settings, self.vectors, path, configs=configs, window=self.window))

    def evaluate_pairs(self, path: str | PathLike, *, configs: Sequence[str] | None = None) -> dict:
        """Graded similarity on an SCWS-layout file, a word-pair file, ``"wordsim353"`` or ``"simlex999"``:
        the ``ctxembed.eval-pairs/2`` document; ``configs`` as in :meth:`evaluate_wic`."""
        from ctxembed.evaluation import run  # the eval commands only

        return as_json(
            run.pairs(self.store, self.settings, self.vectors, path, configs=configs, on_note=self._note,
                      window=self.window)
        )  # fmt: skip

    def evaluate_wsi(self, path: str | PathLike, *, configs: Sequence[str] | None = None, **clustering: Any) -> dict:
        """Word-sense induction against sense labels (a ``word, label, index, sentence`` TSV): the
        ``ctxembed.eval-wsi/1`` document. ``clustering``: ``k``, ``k_max``, ``min_share``, ``sample_seed``,
        ``drop_own`` as in :meth:`senses`; ``configs`` as in :meth:`evaluate_wic`."""
        from ctxembed.evaluation import run  # the eval commands only

        return as_json(
            run.wsi(self.store, self.settings, self.vectors, path, configs=configs,
                    max_tokens=self.engine.max_tokens, on_note=self._note, window=self.window, **clustering)
        )  # fmt: skip

    def fit_mix(
        self, sources: Sequence[str | PathLike], *, split: str = "train", out: str | PathLike | None = None
    ) -> dict:
        """Learn ELMo's layer mix over this explorer's layers on WiC folders and/or SCWS-style files, write
        it to ``out`` (default: the cache folder, read by ``mix="learned"``): the
        ``ctxembed.mix-fit/1`` document."""
        from ctxembed.evaluation import run  # the eval commands only

        return as_json(
            run.fit_mix(
                self.store,
                self.settings,
                self.vectors,
                sources,
                split=split,
                out=out,
                on_note=self._note,
                window=self.window,
            )
        )

    def embed_lines(self, lines: Iterable[str], **options: Any):
        """Batch records (dicts, as ``ctxembed batch`` prints them) for many sentences, one per line, in
        order; a bad line gives an error record. ``options``: ``weights``, ``with_vectors``, ``word``,
        ``start``, ``encoded``, ``chunk`` of :func:`ctxembed.embed_lines`, which this delegates to."""
        from ctxembed.batch.embed import embed_lines  # batch only

        return embed_lines(lines, explorer=self, **options)


class _Shown:
    """Results' shared faces: a JSON dict, a saved file, an HTML view, a rich view."""

    _renderer = ""

    def document(self) -> dict:
        raise NotImplementedError

    def to_dict(self) -> dict:
        """The JSON document, exactly as ``--json`` prints it (JSON types only)."""
        return orjson.loads(dumps(self.document()))

    def save(self, path: str | PathLike) -> None:
        """Write the result to ``path``; the suffix picks the format (.json, .html, .svg, .png)."""
        from ctxembed.views.export import save_document  # files only

        save_document(self.document(), path)

    def _repr_html_(self) -> str:
        from ctxembed.views.export import html_fragment  # files only

        return html_fragment(self.document())

    def render(self, console) -> None:
        from ctxembed.views import render  # rich tables: a drawn view only

        getattr(render, self._renderer)(console, self.document())

    def __rich__(self):
        return _Rendered(self)


@dataclass
class _Rendered:
    """A rich renderable drawing a result with ctxembed's renderer at the width rich offers."""

    result: _Shown

    def __rich_console__(self, console, options):
        from rich.console import Console  # rich: a drawn view only
        from rich.text import Text  # rich: a drawn view only

        buffer = io.StringIO()
        inner = Console(
            file=buffer,
            width=options.max_width,
            color_system=console.color_system,
            force_terminal=console.color_system is not None,
            no_color=console.no_color,
            highlight=False,
        )
        self.result.render(inner)
        yield Text.from_ansi(buffer.getvalue().rstrip("\n"))


@dataclass(eq=False)
class AttendResult(_Shown):
    """One sentence after attention.

    :attr:`tokens` is every token of the sentence, as in the JSON document (``to_dict()["tokens"]``):
    a dict with its ``text``, ``position``, vocabulary ``key``, ``in_vocab``, ``used`` (took part in
    attention) and ``source`` (``vocabulary``, ``estimated``, ``subword`` or ``none``). The arrays'
    token axes follow :attr:`attended_positions`, as the JSON's do: row ``i`` of :attr:`static` is
    ``tokens[attended_positions[i]]``; a word without a vector (``--oov skip``) has no row, and is in
    :attr:`skipped`."""

    explorer: Explorer = field(repr=False)
    result: Contextualized = field(repr=False)
    top: int = default("top")
    with_vectors: bool = default("with_vectors")
    explained: tuple[int, int, int | None] | None = None  # (layer, head, query row or None) --explain shows
    attention: str = default("attention")  # the reading the document carries beside the raw weights (core.readings)

    @property
    def tokens(self) -> list[dict]:
        """Every token of the sentence, in order, with its status (see the class's docstring)."""
        return token_records(self.result)

    @property
    def attended_positions(self) -> list[int]:
        """Positions (into :attr:`tokens`) of the tokens that took part in attention: the arrays' rows."""
        return list(self.result.prepared.used)

    @property
    def skipped(self) -> list[dict]:
        """The tokens left out of attention (no vector, ``--oov skip``): ``{text, position}`` each."""
        return skipped_records(self.result)

    @property
    def weights(self) -> np.ndarray:
        """(layers, heads, query, key) attention weights; rows sum to 1 unless fully masked."""
        return self.result.weights

    @property
    def static(self) -> np.ndarray:
        """(T, d) static vectors of the tokens."""
        return self.result.static

    @property
    def contextual(self) -> np.ndarray:
        """(T, d_out) contextual vectors: the last layer's output."""
        return self.result.contextual

    def document(self) -> dict:
        doc = attend_document(
            self.result, self.explorer.engine, self.explorer.vectors, with_vectors=self.with_vectors, top=self.top
        )
        if self.attention != "raw":
            engine = self.explorer.engine
            doc["attention"] = attention_reading(self.result, self.attention, engine, doc["masked_keys"], top=self.top)
        if self.explained is not None:
            layer, head, query = self.explained
            engine = self.explorer.engine
            doc["explain"] = explain_steps(engine, self.result, layer=layer, head=head, query=query)
        return doc

    def render(self, console, **view: Any) -> None:
        """Draw it on a rich ``console`` with the view's options (``layer``, ``head``, ``all_heads``,
        ``all_layers``, ``specials`` ...), refused as the command line refuses them."""
        from ctxembed.views.render import render_attend  # rich tables: a drawn view only

        check_specials(
            view.get("specials", "hide"),
            self.explorer.engine.card,
            all_heads=view.get("all_heads", False),
            all_layers=view.get("all_layers", False),
            attention=self.attention,
        )
        render_attend(console, self.document(), **view)

    def __repr__(self) -> str:
        return f"AttendResult(tokens={[t['text'] for t in self.tokens]}, weights={self.weights.shape})"


@dataclass(eq=False)
class _WordDocument(_Shown):
    """A result that is its JSON document, about one word (compare, neighbors)."""

    doc: dict = field(repr=False)

    @property
    def word(self) -> str:
        return self.doc["word"]

    def document(self) -> dict:
        return self.doc


@dataclass(eq=False)
class CompareResult(_WordDocument):
    """A word's cosine across sentences: :attr:`static` and :attr:`contextual` are N x N matrices,
    :attr:`layers` (L + 1, N, N) the cosines at the attention input and after each layer."""

    _renderer = "render_compare"

    @property
    def static(self) -> np.ndarray:
        return self.doc["static_similarity"]

    @property
    def contextual(self) -> np.ndarray:
        return self.doc["contextual_similarity"]

    @property
    def layers(self) -> np.ndarray | None:
        return None if self.doc["layers"] is None else np.stack(self.doc["layers"])  # (L + 1, N, N)

    def __repr__(self) -> str:
        return f"CompareResult(word={self.word!r}, sentences={len(self.doc['sentences'])})"


@dataclass(eq=False)
class NeighborsResult(_WordDocument):
    """A word's nearest vocabulary words: :attr:`static` and :attr:`contextual` lists of (word, cosine)."""

    _renderer = "render_neighbors"

    @property
    def static(self) -> list[tuple[str, float]]:
        return [(n["word"], n["similarity"]) for n in self.doc["static"]]

    @property
    def contextual(self) -> list[tuple[str, float]]:
        return [(n["word"], n["similarity"]) for n in self.doc["contextual"]]

    def __repr__(self) -> str:
        return f"NeighborsResult(word={self.word!r}, contextual={[w for w, _ in self.contextual]})"


@dataclass(eq=False)
class SideBySideResult(_WordDocument):
    """A sentence and a word under several models (:func:`side_by_side`): ``doc["models"]`` per view."""

    _renderer = "render_side_by_side"

    def __repr__(self) -> str:
        views = [f"{m['model']}/{m['preset']}" for m in self.doc["models"]]
        return f"SideBySideResult(word={self.word!r}, views={views})"
