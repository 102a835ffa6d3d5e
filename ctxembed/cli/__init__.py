"""The ctxembed command line: thin commands over the library; errors become exit codes here.

Exit codes: 0 success, 1 data or runtime error, 2 usage error. Every error is one line on
stderr, ``ctxembed: error: ...``; set CTXEMBED_DEBUG=1 to see a traceback instead.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from ctxembed.errors import CtxembedError, DataError, UsageError
from ctxembed.explore import DEFAULT_MAX_TOKENS
from ctxembed.output import emit_json, say, stdout_console

# click's exception base, wherever this typer keeps click (recent typers vendor it).
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _OneLineErrors(TyperGroup):
    """Report click's usage errors as one line on stderr (exit 2) instead of a boxed panel."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _ClickException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `ctxembed` or `ctxembed vectors`: help, no error
                say(exc.format_message())
            else:
                say(f"ctxembed: error: {exc.format_message()}")
            sys.exit(exc.exit_code)
        except typer.Abort:
            say("ctxembed: aborted")
            sys.exit(130)
        if standalone_mode:
            sys.exit(code if isinstance(code, int) else 0)
        return code


app = typer.Typer(
    cls=_OneLineErrors,
    help="See how self-attention turns static word vectors into contextual ones.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
vectors_app = typer.Typer(help="Inspect and convert vector files.", no_args_is_help=True)
app.add_typer(vectors_app, name="vectors")


def reports_errors(command):
    """Turn domain errors into one stderr line and their exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CtxembedError as exc:
            if os.environ.get("CTXEMBED_DEBUG"):
                raise
            say(f"ctxembed: error: {exc.message}")
            raise typer.Exit(exc.exit_code) from None

    return wrapper


# ------------------------------------------------------------------------------ shared options
VectorsOpt = Annotated[
    str | None,
    typer.Option(
        "--vectors",
        envvar="CTXEMBED_VECTORS",
        help="A vector file (word2vec text/binary, GloVe, fastText .vec/.bin, .gz/.bz2, a ctxembed store) "
        "or a gensim-data name such as glove-wiki-gigaword-50. Default: the shipped GloVe 6B 100d.",
        show_default=False,
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Keep only the N most frequent words.")]
TrustOpt = Annotated[bool, typer.Option("--trust", help="Allow gensim's native .kv/.model files, which are pickles.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]


def open_store(vectors: str | None, limit: int | None, trust: bool):
    from ctxembed.sources import open_vectors

    return open_vectors(vectors, limit=limit, trust=trust, on_convert=say)


# ------------------------------------------------------------------------------ vectors
@vectors_app.command("info")
@reports_errors
def vectors_info(
    source: Annotated[str | None, typer.Argument(help="Vector file or gensim-data name (default: shipped).")] = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a vector source's format, size, dimension, and cache state."""
    from ctxembed.sources import describe

    info = describe(source, limit=limit)
    if json_out:
        emit_json({"schema": "ctxembed.vectors-info/1", **info})
        return
    from ctxembed.render import render_info

    render_info(stdout_console(), info)


@vectors_app.command("convert")
@reports_errors
def vectors_convert(
    source: Annotated[str, typer.Argument(help="Vector file or gensim-data name.")],
    out: Annotated[Path, typer.Argument(help="Where to write the ctxembed store (.ctxv).")],
    limit: LimitOpt = None,
    trust: TrustOpt = False,
    quantize: Annotated[bool, typer.Option("--quantize", help="Store int8 with one scale per row.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Convert any supported vector file into a ctxembed store that opens in milliseconds."""
    from ctxembed.formats import detect_format
    from ctxembed.sources import convert, resolve
    from ctxembed.store import VectorStore, write_store

    resolved = resolve(source)
    fmt = "ctxembed-store" if resolved.kind == "default" else detect_format(resolved.path)
    if out.exists() and out.is_dir():
        raise UsageError(f"{out}: is a directory; give a file name for the store")
    if fmt == "ctxembed-store":
        store = VectorStore.open(resolved.path)
        store = store.head(limit) if limit and limit < len(store) else store
        keep_int8 = quantize or store.dtype == "int8"  # never inflate an int8 store to float32 by accident
        write_store(out, store.words, store.matrix(), quantize=keep_int8, meta=dict(store.meta, format=fmt))
    else:
        convert(resolved.path, fmt, out, limit=limit, trust=trust, quantize=quantize)
    store = VectorStore.open(out)
    result = {
        "source": source,
        "format": fmt,
        "out": str(out),
        "words": len(store),
        "dim": store.dim,
        "dtype": store.dtype,
        "bytes": out.stat().st_size,
    }
    if json_out:
        emit_json({"schema": "ctxembed.vectors-convert/1", **result})
    else:
        say(f"wrote {out}: {len(store):,} words x {store.dim} dimensions ({store.dtype}, {result['bytes']:,} bytes)")


# ------------------------------------------------------------------------------ attention options
_ATTENTION_OPTIONS = [
    (
        "preset",
        Annotated[
            str,
            typer.Option(
                "--preset",
                help="Named recipe: default (separates senses), textbook (softmax(XXᵀ/√d)X), notes (unscaled).",
            ),
        ],
        "default",
    ),
    (
        "scale",
        Annotated[
            bool | None, typer.Option("--scale/--no-scale", help="Divide scores by sqrt(d_k).", show_default=False)
        ],
        None,
    ),
    ("temperature", Annotated[float | None, typer.Option("--temperature", min=1e-6, help="Divide scores by T.")], None),
    (
        "normalization",
        Annotated[str | None, typer.Option("--normalization", help="softmax, or sum (negatives clamped to 0).")],
        None,
    ),
    (
        "projection",
        Annotated[
            str | None, typer.Option("--projection", help="identity (Q=K=V=X), random (Xavier, --seed) or file.")
        ],
        None,
    ),
    ("weights", Annotated[Path | None, typer.Option("--weights", help="Projections .npz (l0.h0.W_query, ...).")], None),
    ("seed", Annotated[int | None, typer.Option("--seed", help="Seed of the random projections.")], None),
    ("d_out", Annotated[int | None, typer.Option("--d-out", min=1, help="Per-head size of random projections.")], None),
    (
        "output_projection",
        Annotated[
            bool | None,
            typer.Option(
                "--output-projection/--no-output-projection", help="Random W_out back to d.", show_default=False
            ),
        ],
        None,
    ),
    (
        "causal",
        Annotated[
            bool | None, typer.Option("--causal/--no-causal", help="Attend only to earlier tokens.", show_default=False)
        ],
        None,
    ),
    (
        "causal_mode",
        Annotated[
            str | None, typer.Option("--causal-mode", help="before (-inf, then softmax) or after (renormalise).")
        ],
        None,
    ),
    ("heads", Annotated[int | None, typer.Option("--heads", min=1, help="Attention heads.")], None),
    ("layers", Annotated[int | None, typer.Option("--layers", min=1, help="Stacked layers.")], None),
    (
        "residual",
        Annotated[
            bool | None, typer.Option("--residual/--no-residual", help="out = λ·x + attention(x).", show_default=False)
        ],
        None,
    ),
    ("residual_scale", Annotated[float | None, typer.Option("--residual-scale", help="λ of the residual.")], None),
    (
        "layer_norm",
        Annotated[bool | None, typer.Option("--layer-norm/--no-layer-norm", help="Post-norm.", show_default=False)],
        None,
    ),
    (
        "positions",
        Annotated[
            bool | None,
            typer.Option("--positions/--no-positions", help="Add sinusoidal position encodings.", show_default=False),
        ],
        None,
    ),
    (
        "exclude_self",
        Annotated[
            bool | None,
            typer.Option(
                "--exclude-self/--include-self",
                help="Mask the diagonal: attend only to other tokens.",
                show_default=False,
            ),
        ],
        None,
    ),
    (
        "abtt",
        Annotated[int | None, typer.Option("--abtt", min=0, help="Remove the mean and D top directions (0 = off).")],
        None,
    ),
    ("sif", Annotated[float | None, typer.Option("--sif", min=0.0, help="SIF key bias a (0 = off).")], None),
    ("oov", Annotated[str, typer.Option("--oov", help="Out-of-vocabulary tokens: skip, zero or error.")], "skip"),
    (
        "max_tokens",
        Annotated[
            int, typer.Option("--max-tokens", min=1, help="Longest sentence accepted (attention needs n² memory).")
        ],
        DEFAULT_MAX_TOKENS,
    ),
    ("vectors", VectorsOpt, None),
    ("limit", LimitOpt, None),
    ("trust", TrustOpt, False),
]
_ATTENTION_NAMES = [name for name, _, _ in _ATTENTION_OPTIONS]


@dataclass
class Run:
    """What the attention options of a command resolve to."""

    store: object
    settings: object
    engine: object
    source: str


def with_attention_options(command):
    """Give a command every attention option; it receives them resolved as ``run: Run``."""
    signature = inspect.signature(command, eval_str=True)  # __signature__ is not evaluated again
    own = [p for p in signature.parameters.values() if p.name != "run"]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        for name, annotation, default in _ATTENTION_OPTIONS
    ]

    @functools.wraps(command)
    def wrapper(**kwargs):
        options = {name: kwargs.pop(name) for name in _ATTENTION_NAMES}
        kwargs["run"] = lambda: _resolve_run(options)
        return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + extra)
    return wrapper


def _resolve_run(options: dict) -> Run:
    from ctxembed.explore import Engine
    from ctxembed.settings import build_settings

    overrides = {
        k: options[k]
        for k in (
            "scale",
            "temperature",
            "normalization",
            "projection",
            "seed",
            "d_out",
            "output_projection",
            "causal",
            "causal_mode",
            "heads",
            "layers",
            "residual",
            "residual_scale",
            "layer_norm",
            "positions",
            "exclude_self",
            "abtt",
            "sif",
        )
    }
    overrides["weights_file"] = str(options["weights"]) if options["weights"] else None
    settings = build_settings(options["preset"], **overrides)
    store = open_store(options["vectors"], options["limit"], options["trust"])
    engine = Engine(store, settings, oov=options["oov"], max_tokens=options["max_tokens"])
    return Run(store, settings, engine, options["vectors"] or "default")


def show(doc: dict, json_out: bool, renderer: str) -> None:
    """Print a document: as JSON, or laid out by ``ctxembed.render.<renderer>``."""
    if json_out:
        emit_json(doc)
        return
    from ctxembed import render

    getattr(render, renderer)(stdout_console(), doc)


def read_text_argument(sentence: str | None, what: str = "SENTENCE") -> str:
    """A sentence argument, or stdin when it is "-" or missing and stdin is not a terminal."""
    if sentence is not None and sentence != "-":
        return sentence
    if sentence is None and sys.stdin.isatty():
        raise UsageError(f"give a {what} or pipe text on stdin")
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise DataError(f"stdin is not valid UTF-8 (byte {exc.start})") from None


def vectors_summary(run: Run) -> dict:
    store = run.store
    return {
        "source": run.source,
        "name": store.meta.get("name", store.path.name),
        "words": len(store),
        "dim": store.dim,
    }


# ------------------------------------------------------------------------------ attend
@app.command()
@reports_errors
@with_attention_options
def attend(
    sentence: Annotated[str | None, typer.Argument(help="The sentence ('-' or none: read stdin).")] = None,
    json_out: JsonOpt = False,
    with_vectors: Annotated[
        bool, typer.Option("--with-vectors", help="JSON: add static and contextual vectors.")
    ] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Print every step with its numbers.")] = False,
    layer: Annotated[int | None, typer.Option("--layer", min=0, help="Layer to show (default: the last).")] = None,
    head: Annotated[int | None, typer.Option("--head", min=0, help="Head to show (default: mean of heads).")] = None,
    all_heads: Annotated[bool, typer.Option("--all-heads", help="One matrix per head (small multiples).")] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="Most-attended tokens listed per token.")] = 3,
    max_display: Annotated[int, typer.Option("--max-display", min=2, help="Tokens shown in the matrix.")] = 24,
    run=None,
) -> None:
    """Show the attention weights of a sentence and how far context moved each token."""
    from ctxembed.report import attend_document

    text = read_text_argument(sentence)
    r = run()
    a = r.settings.attention
    if layer is not None and layer >= a.layers:
        raise UsageError(f"--layer {layer} does not exist: there are {a.layers} layer(s), numbered from 0")
    if head is not None and head >= a.heads:
        raise UsageError(f"--head {head} does not exist: there are {a.heads} head(s), numbered from 0")
    result = r.engine.run([r.engine.prepare(text)])[0]
    doc = attend_document(result, r.settings, vectors_summary(r), with_vectors=with_vectors, top=top)
    if json_out:
        if explain:
            doc["explain"] = explain_document(r.engine, result, layer, head)
        emit_json(doc)
        return
    from ctxembed.render import render_attend, render_explain

    console = stdout_console()
    render_attend(
        console,
        doc,
        result,
        layer=a.layers - 1 if layer is None else layer,
        head=head,
        all_heads=all_heads,
        max_display=max_display,
    )
    if explain:
        render_explain(console, explain_document(r.engine, result, layer, head), result)


def explain_document(engine, result, layer: int | None, head: int | None) -> dict:
    from ctxembed.report import explain_steps

    a = engine.settings.attention
    shown = a.layers - 1 if layer is None else layer  # the same layer the matrix shows
    return explain_steps(engine.explain(result, layer=shown, head=head or 0), result, a)


# ------------------------------------------------------------------------------ compare
@app.command()
@reports_errors
@with_attention_options
def compare(
    sentences: Annotated[
        list[str] | None, typer.Argument(help="Two or more sentences ('-': one per stdin line).")
    ] = None,
    word: Annotated[
        str | None, typer.Option("--word", "-w", help="The word to compare (default: every shared word).")
    ] = None,
    json_out: JsonOpt = False,
    run=None,
) -> None:
    """Static against contextual cosine of a word across sentences: an N×N matrix each."""
    from ctxembed.report import compare_document

    if not sentences or sentences == ["-"]:
        lines = read_text_argument(None if not sentences else "-", "pair of SENTENCES").splitlines()
        sentences = [line.strip() for line in lines if line.strip()]
    if len(sentences) < 2:
        raise UsageError(f"compare needs at least two sentences, got {len(sentences)}")
    r = run()
    results = r.engine.run([r.engine.prepare(s) for s in sentences])
    doc = compare_document(results, word, r.settings, vectors_summary(r))
    show(doc, json_out, "render_compare")


# ------------------------------------------------------------------------------ neighbors
@app.command()
@reports_errors
@with_attention_options
def neighbors(
    sentence: Annotated[str | None, typer.Argument(help="The sentence ('-' or none: read stdin).")] = None,
    word: Annotated[str, typer.Option("--word", "-w", help="The word whose neighbours to list.")] = ...,
    k: Annotated[int, typer.Option("-k", "--k", min=1, max=1000, help="How many neighbours.")] = 10,
    json_out: JsonOpt = False,
    run=None,
) -> None:
    """Nearest vocabulary words of a word's contextual vector, beside those of its static vector."""
    from ctxembed.report import neighbors_document

    text = read_text_argument(sentence)
    r = run()
    result = r.engine.run([r.engine.prepare(text)])[0]
    doc = neighbors_document(r.engine, result, word, k, vectors_summary(r))
    show(doc, json_out, "render_neighbors")


# ------------------------------------------------------------------------------ batch
@app.command()
@reports_errors
@with_attention_options
def batch(
    source: Annotated[
        str, typer.Argument(help="File of sentences, one per line, or JSON Lines with a 'text' field; '-' for stdin.")
    ] = "-",
    with_vectors: Annotated[bool, typer.Option("--with-vectors", help="Add static and contextual vectors.")] = False,
    no_weights: Annotated[bool, typer.Option("--no-weights", help="Leave the attention weights out.")] = False,
    word: Annotated[str | None, typer.Option("--word", "-w", help="Add this word's contextual vector.")] = None,
    chunk: Annotated[int, typer.Option("--chunk", min=1, max=100_000, help="Sentences per attention batch.")] = 1024,
    workers: Annotated[int, typer.Option("--workers", min=0, help="Processes (0: one per core for big input).")] = 0,
    run=None,
) -> None:
    """One JSON line per input line, in order; bad lines become {"line": k, "error": ...} records."""
    from ctxembed.batch import run_batch

    r = run()
    run_batch(
        r.engine, source, with_vectors=with_vectors, weights=not no_weights, word=word, chunk=chunk, workers=workers
    )


# ------------------------------------------------------------------------------ eval
eval_app = typer.Typer(help="Measure how well contextual vectors separate word senses.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")

ConfigOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        "-c",
        help="A configuration of the ladder (static, textbook, textbook+abtt, "
        "textbook+sif, textbook+self-mask, abtt+sif, abtt+self-mask, sif+self-mask, default) or "
        "'custom' (the attention options given here). Repeatable; default: the whole ladder.",
    ),
]


def _sweep(names: list[str] | None, run, default: tuple[str, ...], evaluate) -> list[dict]:
    """Evaluate each chosen configuration (default: ``default``); "custom" is the command line's settings."""
    from ctxembed.evaluate import named_settings

    chosen = names or list(default)
    custom = run().settings if "custom" in chosen else None
    rows = []
    for name in chosen:
        settings = named_settings(name, custom)
        rows.append({"name": name, "settings": settings.as_dict() if settings else None, **evaluate(name, settings)})
    return rows


@eval_app.command("wic")
@reports_errors
@with_attention_options
def eval_wic(
    directory: Annotated[Path, typer.Argument(help="Folder with SPLIT.data.txt and SPLIT.gold.txt (WiC format).")],
    tune_on: Annotated[str, typer.Option("--tune-on", help="Split whose labels choose the threshold.")] = "train",
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    run=None,
) -> None:
    """Word-in-Context accuracy: same sense or not, by thresholding the cosine of the target's vectors."""
    from ctxembed.evaluate import LADDER, evaluate_wic, read_wic

    splits = read_wic(directory)
    resolved = functools.lru_cache(maxsize=1)(run)
    store = resolved().store

    def evaluate(name, settings):
        say(f"evaluating {name} on {', '.join(s.name for s in splits)} ...")
        return evaluate_wic(store, splits, settings, tune_on)

    rows = _sweep(config, resolved, tuple(LADDER), evaluate)
    primary = next((r for r in rows if r["name"] == "default"), rows[0])
    doc = {
        "schema": "ctxembed.eval-wic/1",
        "vectors": vectors_summary(resolved()),
        "directory": str(directory),
        "tuned_on": tune_on,
        "config": primary["name"],
        "threshold": primary["threshold"],
        "splits": primary["splits"],
        "configs": rows,
    }
    show(doc, json_out, "render_eval_wic")


@eval_app.command("senses")
@reports_errors
@with_attention_options
def eval_senses(
    path: Annotated[
        Path | None, typer.Argument(help="word<TAB>sense<TAB>sentence file (default: the shipped polysemy suite).")
    ] = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    run=None,
) -> None:
    """The share of ambiguous words whose same-sense pairs all beat their cross-sense pairs."""
    from ctxembed.evaluate import LADDER, default_senses_path, evaluate_senses, read_senses

    rows_in = read_senses(path or default_senses_path())
    resolved = functools.lru_cache(maxsize=1)(run)
    store = resolved().store
    rows = _sweep(config, resolved, tuple(LADDER), lambda name, settings: evaluate_senses(store, rows_in, settings))
    doc = {
        "schema": "ctxembed.eval-senses/1",
        "vectors": vectors_summary(resolved()),
        "file": str(path or default_senses_path()),
        "configs": rows,
    }
    show(doc, json_out, "render_eval_senses")


@eval_app.command("pairs")
@reports_errors
@with_attention_options
def eval_pairs(
    path: Annotated[
        str,
        typer.Argument(
            help="SCWS-layout file (contexts with <b> word </b>), or a word-pair "
            "file (word1 TAB word2 TAB score), or wordsim353 / simlex999."
        ),
    ],
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    run=None,
) -> None:
    """Graded similarity: Spearman ρ in context (SCWS), or gensim's Pearson and Spearman for word pairs."""
    from ctxembed.evaluate import evaluate_scws, evaluate_word_pairs, is_scws, read_scws, resolve_pairs_file

    file = resolve_pairs_file(path)
    resolved = functools.lru_cache(maxsize=1)(run)
    store = resolved().store
    if is_scws(file):
        items = read_scws(file)
        rows = _sweep(
            config,
            resolved,
            ("static", "textbook", "default"),
            lambda name, settings: evaluate_scws(store, items, settings),
        )
        doc = {"schema": "ctxembed.eval-pairs/1", "layout": "scws", "file": str(file), "configs": rows}
    else:
        doc = {
            "schema": "ctxembed.eval-pairs/1",
            "layout": "word-pairs",
            "file": str(file),
            "configs": [{"name": "static", **evaluate_word_pairs(store, file)}],
        }
    doc["vectors"] = vectors_summary(resolved())
    show(doc, json_out, "render_eval_pairs")


def main() -> None:
    """Console-script entry point: one line per unexpected error, never a traceback."""
    try:
        app()
    except BrokenPipeError:
        # `ctxembed batch ... | head`: the reader left; that is not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt:
        say("ctxembed: interrupted")
        sys.exit(130)
    except MemoryError:
        say("ctxembed: error: out of memory (try fewer tokens or a smaller --limit)")
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, with a way to get the traceback
        if os.environ.get("CTXEMBED_DEBUG"):
            raise
        say(f"ctxembed: internal error: {type(exc).__name__}: {exc} (set CTXEMBED_DEBUG=1 for a traceback)")
        sys.exit(1)
