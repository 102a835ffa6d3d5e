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
from ctxembed.engine.readout import split_readout
from ctxembed.errors import SettingError
from ctxembed.vectors.catalogue import DEFAULT_MODEL, MODELS, ModelEntry
from ctxembed.vectors.derived import find, names

if TYPE_CHECKING:
    from ctxembed.engine.contract import ContextEngine
    from ctxembed.presets import Settings
    from ctxembed.vectors.store import VectorStore

Model = ModelEntry  # a registry entry, by the name the engine package exports


def entry_of(model: str) -> ModelEntry:
    """The registry's entry for ``model`` (a name or an alias, or NAME@N: the model read out at hidden state
    N); SettingError naming the known ones."""
    entry = find(split_readout(model)[0])
    if entry is None:
        raise SettingError(f"{{model}} {model!r}: no such model (known: {', '.join(names())})", "model")
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
    settings). Raises SettingError for a model no entry of :data:`MODELS` names, and, before anything
    is opened, for an option the model does not take (:func:`check_options`)."""
    name, layer = split_readout(model)
    entry = entry_of(name)
    check_options(entry.name, given_options(vectors, preset, keywords), preset=preset)
    if layer is not None:  # NAME@N: a trained model read out at hidden state N, as every command and eval take it
        if not entry.trained:
            raise SettingError(
                f"{{model}} {model}: NAME@N reads a trained model's hidden state N (e.g. minilm@3); "
                f"the {entry.name} model's read-out is its {{mix}}", "model", "mix"
            )  # fmt: skip
        keywords["readout_layer"] = layer
    return FAMILIES[entry.family].open(entry, vectors, preset, **keywords)


_UNSET = {"preset": "default", "trust": False, "oov": "skip"}  # an option at these values was not given


def given_options(vectors: Any, preset: str, keywords: dict[str, Any]) -> list[str]:
    """The options :func:`open_engine`'s arguments give, by their Python names: those set to something
    other than None or their unset value (``trust=False``, ``oov="skip"``, the default preset)."""
    every = {name for family in FAMILIES.values() for name in family.options}  # what some model takes
    values = {"vectors": vectors, "preset": preset, **keywords}
    return [name for name, value in values.items() if name in every and value is not None and _UNSET.get(name) != value]


def model_options(model: str) -> frozenset[str]:
    """The options ``model`` takes, by their Python names (its family's declaration; ``model`` itself aside)."""
    return FAMILIES[entry_of(model).family].options


def check_options(model: str, given: list[str], *, preset: str | None = None) -> None:
    """Refuse the options in ``given`` that ``model`` does not take, before any work: one SettingError
    (exit 2) naming them and the model, never an option silently ignored or recorded in a document.
    ``preset``: its value, to name it in the message."""
    takes = model_options(model)
    refused = [name for name in given if name not in takes]
    if not refused:
        return
    shown = ", ".join(f"preset {preset!r}" if name == "preset" and preset else "{" + name + "}" for name in refused)
    verb = "does" if len(refused) == 1 else "do"
    kept = ", ".join("{" + name + "}" for name in sorted(takes))
    named = [name for name in refused if name != "preset"]
    raise SettingError(
        f"{shown} {verb} not apply to {{model}} {model}: it runs as trained and takes only {kept}",
        *named,
        "model",
        *sorted(takes),  # named too, so the command line shows them as flags
    )


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


def engine_for(
    settings: Settings, store: VectorStore, *, max_tokens: int, oov: str = "skip", window: int | None = None
) -> ContextEngine:
    """The engine a job (eval, eval wsi) computes one configuration with: the registry's model for
    ``settings`` (:func:`model_of`), the glove model over ``store`` and ``settings`` as they are, a
    trained model with its read-out from the settings' mix (its own words: ``store`` is not used);
    ``window``: the tokens either side of a target it reads (None: its model's own)."""
    entry = entry_of(model_of(settings))
    return FAMILIES[entry.family].open(entry, None, settings.preset, store=store, settings=settings,
                                       max_tokens=max_tokens, oov=oov, window=window)  # fmt: skip


def side_by_side_views() -> list[tuple[str, str]]:
    """(model, preset) of every view ``ctxembed side-by-side`` shows: each model's ``shown`` presets,
    in the order of :data:`MODELS`."""
    return [(name, preset) for name, entry in MODELS.items() for preset in entry.shown]
