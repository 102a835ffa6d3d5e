"""Model name -> engine: the registry's entries (:mod:`ctxembed.vectors.catalogue`, the one registry, as
data) opened through their families (:mod:`ctxembed.engine.families`).

    engine = open_engine("glove.6B.50d", model="glove")    # any ContextEngine (engine/contract.py)

Every command, the API and the server open their engine here by the name ``--model`` gives (or one of
its aliases); none writes ``if model == ...``. A new model of a known family is one entry of
:data:`MODELS`; a new family is one record of :data:`ctxembed.engine.families.FAMILIES`.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any

from ctxembed.engine.families import FAMILIES
from ctxembed.errors import SettingError
from ctxembed.vectors.catalogue import DEFAULT_MODEL, MODELS, ModelEntry, find

if TYPE_CHECKING:
    from ctxembed.engine.contract import ContextEngine
    from ctxembed.presets import Settings
    from ctxembed.vectors.store import VectorStore

Model = ModelEntry  # a registry entry, by the name the engine package exports


def entry_of(model: str) -> ModelEntry:
    """The registry's entry for ``model`` (a name or an alias); SettingError naming the known ones."""
    entry = find(model)
    if entry is None:
        raise SettingError(f"{{model}} {model!r}: no such model (known: {', '.join(MODELS)})", "model")
    return entry


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
    entry = entry_of(model)
    if entry.trained:
        _refuse_settings(entry.name, preset, keywords)
    return FAMILIES[entry.family].open(entry, vectors, preset, **keywords)


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
    entry = entry_of(model)
    if entry.trained:
        trainable = ", ".join(name for name, other in MODELS.items() if not other.trained)
        raise SettingError(
            f"{{model}} {model}: {job} applies to the attention of the {trainable} model (W_q, W_k, W_v over "
            f"static vectors); {model}'s weights are pretrained and run as trained",
            "model",
        )


def model_of(settings: Settings) -> str:
    """The model that computes ``settings``: the trained model they read out (``settings.model``: a
    trained model's own settings, or eval's ``minilm@3``, minilm read out at layer 3 by their mix),
    else the default model, whose presets are the attention settings' (default, textbook, learned ...)."""
    return settings.model or DEFAULT_MODEL


def engine_for(settings: Settings, store: VectorStore, *, max_tokens: int, oov: str = "skip") -> ContextEngine:
    """The engine a job (eval, eval wsi) computes one configuration with: the registry's model for
    ``settings`` (:func:`model_of`), the glove model over ``store`` and ``settings`` as they are, a
    trained model with its read-out from the settings' mix (its own words: ``store`` is not used)."""
    entry = MODELS[model_of(settings)]
    return FAMILIES[entry.family].open(entry, None, settings.preset, store=store, settings=settings,
                                       max_tokens=max_tokens, oov=oov)  # fmt: skip


def side_by_side_views() -> list[tuple[str, str]]:
    """(model, preset) of every view ``ctxembed side-by-side`` shows: each model's ``shown`` presets,
    in the order of :data:`MODELS`."""
    return [(name, preset) for name, entry in MODELS.items() for preset in entry.shown]
