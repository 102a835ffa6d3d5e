"""What the settings make of a store of static vectors, for the glove engine and for training: the
settings a weights file records (:func:`resolve_settings`), the query/key/value projections
(identity, random or a file's), and the all-but-the-top removal. No printing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxembed.budget import check_projections
from ctxembed.core.abtt import TopRemoval
from ctxembed.core.mix import LayerMix
from ctxembed.core.projections import LayerParams, random_params
from ctxembed.engine.contract import WORDS, Masks, ModelCard
from ctxembed.errors import DataError, SettingError
from ctxembed.presets import ATTENTION_OPTIONS, SETTINGS, Settings, build_settings
from ctxembed.vectors.mixfiles import resolve_mix
from ctxembed.vectors.statistics import statistics
from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.weights import describe_weights, load_projections, trained_settings, weights_path


def resolve_settings(preset: str = "default", **overrides: Any) -> Settings:
    """:func:`ctxembed.presets.build_settings` with its weights file read: the settings the file (given,
    or the preset's) records, when ``ctxembed train`` wrote it, replace the preset's, so ``--weights
    FILE`` needs no other flag; settings given still win."""
    settings = build_settings(preset, **overrides)
    if not settings.weights_file:
        return settings
    path = weights_path(settings.weights_file)  # the learned preset names its shipped file: where it is
    recorded = trained_settings(path)
    if recorded is not None:
        settings = build_settings(preset, recorded=recorded, **overrides)
    return settings if path == settings.weights_file else replace(settings, weights_file=path)


def projections_text(settings: Settings) -> str | None:
    """Where W_query, W_key, W_value come from, when not the identity; a trained file names what it learned."""
    if settings.projection == "random":
        return f"W_query, W_key, W_value are random (Xavier uniform, seed {settings.seed}), not trained"
    if settings.projection == "file":
        return describe_weights(settings.weights_file)
    return None


def projection_params(settings: Settings, d_in: int) -> list[LayerParams] | None:
    """The query/key/value projections ``settings`` ask for on d_in-dimensional vectors:
    None for the identity, Xavier matrices from the seed, or the arrays of a weights file."""
    a = settings.attention
    if settings.projection == "identity":
        return None
    if settings.projection == "random":
        check_projections(d_in, settings.head_size(d_in), a.heads, a.layers, settings.output_projection)
        return random_projections(settings, d_in)
    try:
        return load_projections(settings.weights_file, d_in, a)
    except FileNotFoundError:
        raise DataError(f"{settings.weights_file}: no such file") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"{settings.weights_file}: {exc}") from None


def random_projections(settings: Settings, d_in: int) -> list[LayerParams]:
    """Xavier matrices from ``settings.seed`` for d_in-dimensional vectors, each head of size
    ``settings.head_size(d_in)``: what ``--projection random`` draws, and where training starts."""
    a = settings.attention
    d_out = settings.head_size(d_in)
    if d_out < 1:
        raise SettingError(
            f"{{heads}} {a.heads} leave no dimensions per head of the {d_in}; give {{d_out}}", "heads", "d_out"
        )
    try:
        return random_params(d_in, d_out, a, seed=settings.seed, output_projection=settings.output_projection)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


def top_removal(store: VectorStore, settings: Settings) -> TopRemoval | None:
    """All-but-the-top removal of ``settings.abtt`` directions, or None when it is off."""
    if not settings.abtt:
        return None
    if not SETTINGS["abtt"].fits(settings.abtt, store.dim, len(store)):  # the rule fit_to_vectors applies
        raise SettingError(
            f"{{abtt}} {settings.abtt} needs vectors of more than {settings.abtt} dimensions and at least 2 words "
            f"(these have {store.dim} and {len(store)})",
            "abtt",
        )
    return TopRemoval.from_statistics(statistics(store, min(settings.abtt_words, len(store))), settings.abtt)


def settings_card(settings: Settings, dim: int, out_dim: int, readout: str, *, parameters: int = 0) -> ModelCard:
    """The glove model's card (:class:`ctxembed.engine.contract.ModelCard`) for these settings: its
    sizes and masks are the attention settings', its read-out the mix's (``readout``), ``parameters``
    its projections' numbers (:func:`projection_parameters`)."""
    a = settings.attention
    masks = Masks(causal=a.causal, exclude_self=a.exclude_self, exclude_twins=a.exclude_twins)
    if masks.masked:
        masks = replace(masks, about=f"the attention settings mask {', '.join(masks.masked)}")
    return ModelCard(
        name="glove",
        family="attention",
        layers=a.layers,
        heads=a.heads,
        dim=dim,
        out_dim=out_dim,
        units=WORDS,
        masks=masks,
        readout=readout,
        options=ATTENTION_OPTIONS,
        trained=False,
        residual=float(a.residual_scale) if a.residual and not a.layer_norm else 0.0,
        parameters=parameters,
    )


def projection_parameters(params: list[LayerParams] | None) -> int:
    """The numbers of every layer's projections (W_q, W_k, W_v per head, W_out): what each token is
    multiplied by (0 for the identity, which has none)."""
    return sum(
        array.size
        for layer in params or []
        for array in [layer.W_out, *(a for head in layer.heads or [] for a in vars(head).values())]
        if array is not None
    )


def layer_mix(settings: Settings, dim: int, out_dim: int, layers: int | None = None) -> LayerMix | None:
    """The mix the settings name (with their {mix_norm}), checked against the layers (the settings', or a
    trained model's ``layers``) and the sizes (None: the last layer alone)."""
    mix = resolve_mix(settings.mix, settings.attention.layers if layers is None else layers)
    if mix is not None and settings.mix_norm:
        mix = replace(mix, normalize=True)
    if mix is not None and out_dim != dim:
        raise SettingError(
            f"{{mix}} adds the layers up, but attention outputs have {out_dim} dimensions and its "
            f"input {dim}: use {{output_projection}}, or {{mix}} off",
            "mix",
            "output_projection",
        )
    return mix
