"""Model name -> engine: the one place that knows which engines exist.

    engine = open_engine("glove.6B.50d", model="glove")    # any ContextEngine (engine/contract.py)

Every command, the API and the server open their engine here by the name ``--model`` gives; none
writes ``if model == ...``. A new model is one entry of :data:`MODELS` whose ``open`` imports its
module when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any

from ctxembed.errors import SettingError

if TYPE_CHECKING:
    from ctxembed.engine.contract import ContextEngine
    from ctxembed.presets import Settings
    from ctxembed.vectors.store import VectorStore


@dataclass(frozen=True)
class Model:
    """One model an engine can run: its name, one line about it, and how to open its engine."""

    name: str  # what --model takes
    summary: str  # one line for people (a models list)
    open: Callable[..., ContextEngine]  # (vectors, preset, **open_engine's keywords) -> its engine
    shown: tuple[str, ...] = ("default",)  # the presets `ctxembed side-by-side` shows it with, in order
    # whether the presets and attention settings (heads, layers, causal ...) shape it; a trained model's
    # layers and heads are its own, so the page hides the settings and the server refuses them
    settings: bool = True


def _open_glove(vectors: str | PathLike | None, preset: str, **keywords: Any) -> ContextEngine:
    from ctxembed.engine.glove import Engine, open_glove  # lazy: opening another model does not load this engine

    store = keywords.pop("store", None)
    if store is not None:  # a job's store and Settings (engine_for): no file to open, no preset to fit
        return Engine(store, keywords["settings"], oov=keywords.get("oov", "skip"), max_tokens=keywords["max_tokens"])
    return open_glove(vectors, preset, **keywords)


def _open_minilm(vectors: str | PathLike | None, preset: str, **keywords: Any) -> ContextEngine:
    from ctxembed.engine.minilm import open_minilm  # lazy: the glove model never loads the encoder

    keywords.pop("store", None)  # its words are its own
    return open_minilm(vectors, preset, **keywords)


MODELS: dict[str, Model] = {
    "glove": Model(
        "glove",
        "static word vectors (GloVe by default), attention layers from the settings",
        _open_glove,
        shown=("default", "learned"),  # the textbook mechanism, then its projections trained on Brown
    ),
    "minilm": Model(
        "minilm",
        "all-MiniLM-L6-v2, a trained 6-layer BERT, in NumPy (`ctxembed models install minilm`)",
        _open_minilm,
        settings=False,
    ),
}
DEFAULT_MODEL = "glove"


def open_engine(
    vectors: str | PathLike | None = None,
    preset: str = "default",
    *,
    model: str = DEFAULT_MODEL,
    **keywords: Any,
) -> ContextEngine:
    """The engine of ``model`` for a vector source, a preset and the keywords of
    :func:`ctxembed.engine.glove.open_glove` (limit, trust, oov, max_tokens, on_note, label and
    settings). Raises SettingError for a model no entry of :data:`MODELS` names."""
    entry = MODELS.get(model)
    if entry is None:
        raise SettingError(f"{{model}} {model!r}: no such model (known: {', '.join(MODELS)})", "model")
    if not entry.settings:
        _refuse_settings(model, preset, keywords)
    return entry.open(vectors, preset, **keywords)


def _refuse_settings(model: str, preset: str, keywords: dict[str, Any]) -> None:
    """A trained model runs as trained: a preset or an attention setting given for it is a usage error,
    never silently ignored (the page refuses them the same way)."""
    from ctxembed.presets import SETTINGS

    given = [name for name, value in keywords.items() if name in SETTINGS and value is not None]
    if given:
        shown = ", ".join("{" + name + "}" for name in given)
        verb = "does" if len(given) == 1 else "do"
        raise SettingError(f"model {model} is trained and runs as trained: {shown} {verb} not apply to it", *given)
    if preset != "default":
        raise SettingError(f"model {model} is trained and runs as trained: preset {preset!r} does not apply to it")


def check_trainable(model: str, job: str) -> None:
    """Refuse ``job`` (``train``, ``before-after``) for a model it cannot train: training learns the
    attention projections (W_q, W_k, W_v, W_out) over static vectors, which only a model shaped by the
    attention settings has; a trained model's weights are its own. A SettingError (exit 2) in one line."""
    entry = MODELS.get(model)
    if entry is None:
        raise SettingError(f"{{model}} {model!r}: no such model (known: {', '.join(MODELS)})", "model")
    if not entry.settings:
        trainable = ", ".join(name for name, other in MODELS.items() if other.settings)
        raise SettingError(
            f"{{model}} {model}: {job} applies to the attention of the {trainable} model (W_q, W_k, W_v over "
            f"static vectors); {model}'s weights are pretrained and run as trained",
            "model",
        )


def model_of(settings: Settings) -> str:
    """The model that computes ``settings``: the model its preset names (a trained model's engine runs
    with its name as preset; eval's ``minilm@3`` is minilm read out at layer 3), else the default
    model, whose presets are the attention settings' (default, textbook, learned ...)."""
    name = settings.preset.partition("@")[0]
    return name if name in MODELS else DEFAULT_MODEL


def engine_for(settings: Settings, store: VectorStore, *, max_tokens: int, oov: str = "skip") -> ContextEngine:
    """The engine a job (eval, eval wsi) computes one configuration with: the registry's model for
    ``settings`` (:func:`model_of`), the glove model over ``store`` and ``settings`` as they are, a
    trained model with its read-out from the settings' mix (its own words: ``store`` is not used)."""
    return MODELS[model_of(settings)].open(None, settings.preset, store=store, settings=settings,
                                           max_tokens=max_tokens, oov=oov)  # fmt: skip


def side_by_side_views() -> list[tuple[str, str]]:
    """(model, preset) of every view ``ctxembed side-by-side`` shows: each model's ``shown`` presets,
    in the order of :data:`MODELS`."""
    return [(name, preset) for name, entry in MODELS.items() for preset in entry.shown]
