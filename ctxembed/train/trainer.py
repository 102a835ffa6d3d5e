"""Train the projections W_query, W_key, W_value (and W_out) with a masked-word objective, in NumPy.

The recipe (BERT's masked language model, on frozen static vectors):

1. Read a corpus (one sentence per line, or running text split at sentence ends) into rows of the
   vector store; hold out a fraction of the sentences.
2. In every sentence mask ``mask_rate`` of the tokens: their input vector becomes a learned
   [MASK] vector (d,).
3. Run the attention stack as ``ctxembed attend`` does: :func:`ctxembed.core.attention.encode` itself,
   with ``trace=True`` so that it keeps what the backward pass needs.
4. At each masked position, score the true word and ``negatives`` shared sampled words (drawn
   proportionally to count^0.75) by ``exp(log_scale) * h . e``, e the frozen input vector of a word;
   the loss is the softmax cross-entropy of the true word (:func:`ctxembed.train.backprop.sampled_softmax_loss`).
5. Backpropagate by hand (:mod:`ctxembed.train.backprop`) and take an Adam step (warm-up, then cosine decay).

Every random choice (split, batch order, masks, negatives) comes from a generator seeded by
(seed, purpose, epoch, step), so the same seed gives the same weights bit for bit, and a run
resumed from a checkpoint continues exactly where it stopped.

    corpus = read_corpus("brown.txt", store, max_tokens=128)          # ctxembed.train.corpus
    trainer = Trainer(store, corpus, training_settings(layers=2, heads=4), TrainOptions(epochs=5))
    result = trainer.run()
    write_trained(result, "weights.npz", trainer.options)             # ctxembed.train.checkpoint

:func:`ctxembed.train.run.train_weights` does all of it (what ``ctxembed train`` calls).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from ctxembed.core.attention import encode
from ctxembed.core.projections import LayerParams, validate_params
from ctxembed.engine import Engine
from ctxembed.engine.projections import random_projections
from ctxembed.errors import DataError, UsageError, counted
from ctxembed.presets import TRAIN_DEFAULTS, Settings, TrainOptions, build_settings
from ctxembed.train import backprop
from ctxembed.train.corpus import Batch, Corpus, fill_batch, make_batches
from ctxembed.train.optim import Adam, clip_gradients, learning_rate
from ctxembed.vectors.weights import vectors_record

__all__ = ["TrainOptions", "Trainer", "TrainResult", "Model", "training_settings", "initial_params", "batch_loss"]

TRAIN_SCHEMA = "ctxembed.train/1"
# purposes of the seeded generators, so no two random choices share a stream
_SPLIT, _ORDER, _MASKS, _HELD_OUT = 1, 2, 3, 4


def training_settings(preset: str = "textbook", **overrides) -> Settings:
    """The attention settings a model is trained with: random (Xavier) initial projections from
    ``seed``. Defaults (:data:`TRAIN_DEFAULTS`): 2 layers of 4 heads with W_out, residual and sinusoidal
    positions (a transformer encoder without its feed-forward block and layer norm)."""
    chosen = dict(TRAIN_DEFAULTS)
    chosen.update({k: v for k, v in overrides.items() if v is not None})
    settings = build_settings(preset, projection="random", **chosen)
    if settings.attention.normalization != "softmax":
        raise UsageError(
            "training needs {normalization} softmax (the sum normaliser is not differentiated)", "normalization"
        )
    return settings


def _rng(seed: int, *purpose: int) -> np.random.Generator:
    return np.random.default_rng([seed, *purpose])


# ------------------------------------------------------------------------------------------ model


def initial_params(settings: Settings, d: int, fix_values: bool) -> list[LayerParams]:
    """The untrained model: Xavier-uniform projections from ``settings.seed`` (exactly what
    ``--projection random --seed`` gives), with W_value replaced by identity slices if ``fix_values``."""
    a = settings.attention
    d_out = settings.head_size(d)
    params = random_projections(settings, d)
    try:
        d_model = validate_params(params, d, a)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if d_model != d:
        raise UsageError(
            f"the last layer gives {d_model}-dimensional vectors, but the words it predicts have {d}: "
            f"add {{output_projection}}, or pass {{d_out}} {d // a.heads} with {a.heads} heads",
            "output_projection",
            "d_out",
        )
    if not fix_values:
        return params
    fixed, layer_in = [], d
    for layer in params:
        if layer_in != a.heads * d_out:
            raise UsageError(
                f"{{fix_values}} keeps W_value = I, which needs {{d_out}} {layer_in // a.heads} "
                f"(the layer input {layer_in} split into {a.heads} heads)",
                "fix_values",
                "d_out",
            )
        identity = np.eye(layer_in)  # (d_l, d_l)
        heads = [
            replace(head, W_value=identity[:, h * d_out : (h + 1) * d_out].copy())  # (d_l, d_out) slice h
            for h, head in enumerate(layer.heads)
        ]
        fixed.append(LayerParams(heads, layer.W_out, layer.b_out))
        layer_in = d if layer.W_out is not None else a.heads * d_out
    return fixed


def learned_names(arrays: dict[str, np.ndarray], fix_values: bool) -> list[str]:
    """The weights-file arrays training changes (W_value stays I with ``fix_values``)."""
    return [name for name in arrays if not (fix_values and name.endswith(".W_value"))]


@dataclass
class Model:
    """Everything training changes: the projections, the [MASK] vector and the logit scale."""

    arrays: dict[str, np.ndarray]  # weights-file name -> float32 array
    mask: np.ndarray  # (d,) the input vector of a masked token
    log_scale: np.ndarray  # (1,) logits = exp(log_scale) * h . e + word_bias
    word_bias: np.ndarray  # (V,) output bias of each corpus word
    settings: Settings

    @property
    def params(self) -> list[LayerParams]:
        a = self.settings.attention
        return backprop.arrays_to_params(self.arrays, a.layers, a.heads)

    def trainable(self, fix_values: bool) -> dict[str, np.ndarray]:
        names = learned_names(self.arrays, fix_values)
        extra = {"mask": self.mask, "log_scale": self.log_scale, "word_bias": self.word_bias}
        return {**{name: self.arrays[name] for name in names}, **extra}


def new_model(settings: Settings, d: int, vocabulary: int, fix_values: bool, dtype=np.float32) -> Model:
    params = initial_params(settings, d, fix_values)
    arrays = {name: value.astype(dtype) for name, value in backprop.params_to_arrays(params).items()}
    log_scale = np.array([-0.5 * math.log(d)], dtype=dtype)  # logits start near 0: scale 1 / sqrt(d)
    return Model(arrays, np.zeros(d, dtype=dtype), log_scale, np.zeros(vocabulary, dtype=dtype), settings)


def batch_loss(
    model: Model, batch: Batch, embeddings: np.ndarray, key_bias: np.ndarray | None, *, gradients: bool = True
) -> tuple[float, dict[str, np.ndarray]]:
    """The masked-word loss of one batch and, if asked, its gradient for every array of the model.

    embeddings (V, d) the attention inputs of the corpus words; key_bias (V,) their SIF bias or None.
    """
    settings = model.settings
    static = embeddings[batch.ids]  # (B, T, d)
    inputs = np.where(batch.masked[:, :, None], model.mask, static)  # (B, T, d) masked tokens become [MASK]
    bias = None
    if key_bias is not None:
        bias = np.where(batch.masked, 0, key_bias[batch.ids]).astype(inputs.dtype)  # (B, T) [MASK] hides its word
    params = model.params
    # with gradients, the trace keeps every step the backward pass reads (forward.steps)
    forward = encode(inputs, settings.attention, params, token_mask=batch.real, key_bias=bias, trace=gradients)
    hidden = forward.contextual  # (B, T, d)
    targets = batch.ids[batch.masked]  # (M,)
    accidental = targets[:, None] == batch.negatives[None, :]  # (M, K)
    loss, d_predicted, d_log_scale, d_true_bias, d_negative_bias = backprop.sampled_softmax_loss(
        hidden[batch.masked],
        embeddings[targets],
        embeddings[batch.negatives],
        accidental,
        float(model.log_scale[0]),
        model.word_bias[targets],
        model.word_bias[batch.negatives],
    )  # float, (M, d), float, (M,), (K,)
    if not gradients:
        return loss, {}
    d_hidden = np.zeros_like(hidden)  # (B, T, d)
    d_hidden[batch.masked] = d_predicted  # (M, d) scattered back to their positions
    d_masked, grads = backprop.encode_backward(
        d_hidden, forward.steps, params, settings.attention, batch.real, input_rows=batch.masked
    )  # (M, d) the input gradient at the masked tokens only
    grads["mask"] = d_masked.sum(axis=0)  # (d,) every [MASK] position shares the vector
    grads["log_scale"] = np.array([d_log_scale], dtype=hidden.dtype)  # (1,)
    d_word_bias = np.zeros_like(model.word_bias)  # (V,)
    np.add.at(d_word_bias, targets, d_true_bias)  # (M,) a word masked twice gets both gradients
    np.add.at(d_word_bias, batch.negatives, d_negative_bias)  # (K,) likewise a word drawn twice
    grads["word_bias"] = d_word_bias
    return loss, grads


# ------------------------------------------------------------------------------------------ training


@dataclass
class TrainResult:
    model: Model
    report: dict  # the ctxembed.train/1 document
    interrupted: bool
    state: dict  # what a checkpoint needs to continue: Adam, position, history
    vocabulary: np.ndarray  # (V,) store rows of the corpus words (the order of model.word_bias)


class Trainer:
    """One training run: corpus, vectors and settings in; a model and a report out."""

    def __init__(self, store, corpus: Corpus, settings: Settings, options: TrainOptions, *, corpus_name: str = ""):
        self.store, self.corpus, self.settings, self.options = store, corpus, settings, options
        self.corpus_name = corpus_name
        self.dim = store.dim
        if len(corpus.vocabulary) < 2:  # nothing to choose between: every loss would be 0
            raise DataError(
                f"{corpus_name or 'the corpus'}: every token is the same word "
                f"({store.words[int(corpus.vocabulary[0])]!r}); masked-word prediction needs at least 2 distinct words"
            )
        # the attention inputs of the corpus words: static vectors, after all-but-the-top when on
        plain = replace(settings.attention, heads=1, layers=1)  # only the input ingredients matter here
        engine = Engine(store, replace(settings, projection="identity", weights_file=None, attention=plain))
        self.embeddings = np.ascontiguousarray(engine.project_inputs(store.rows(corpus.vocabulary)))  # (V, d)
        self.key_bias = engine.key_bias(corpus.vocabulary)  # (V,) or None
        sampling = corpus.counts.astype(np.float64) ** 0.75  # (V,)
        self.sampling = sampling / sampling.sum()  # (V,)
        self.train_ids, self.held_out_ids = self._split()
        self.batches_per_epoch = len(make_batches(corpus.sentences, self.train_ids, options.batch_tokens))
        self.total_steps = options.epochs * self.batches_per_epoch
        self.held_out_batches = self._held_out_batches()

    def _split(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.corpus.sentences)
        order = _rng(self.options.seed, _SPLIT).permutation(n)  # (N,)
        n_held = int(round(self.options.held_out * n))
        if self.options.held_out > 0 and n_held == 0 and n >= 2:
            n_held = 1
        if n_held >= n:
            raise DataError(f"the corpus has {counted(n, 'sentence')}: too few to hold {self.options.held_out:.0%} out")
        return np.sort(order[n_held:]), np.sort(order[:n_held])

    def _held_out_batches(self) -> list[Batch]:
        """Fixed masks and negatives, so every evaluation scores the same task."""
        o = self.options
        groups = make_batches(self.corpus.sentences, self.held_out_ids, o.batch_tokens)
        return [
            fill_batch(
                self.corpus.sentences, group, _rng(o.seed, _HELD_OUT, i), o.mask_rate, self.sampling, o.negatives
            )
            for i, group in enumerate(groups)
        ]

    def evaluate(self, model: Model) -> float | None:
        """Held-out loss: the mean over its masked tokens; None without held-out sentences."""
        if not self.held_out_batches:
            return None
        total = count = 0.0
        for batch in self.held_out_batches:
            loss, _ = batch_loss(model, batch, self.embeddings, self.key_bias, gradients=False)
            n = int(batch.masked.sum())
            total, count = total + loss * n, count + n
        return total / count

    def run(
        self,
        *,
        resume: dict | None = None,
        on_step: Callable[[dict], None] | None = None,
        on_epoch: Callable[[dict], None] | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> TrainResult:
        """Train for ``options.epochs``; ``stop()`` is asked after every step (Ctrl-C), and a stopped run
        returns with ``interrupted`` set and the state a checkpoint needs. ``resume`` is such a state.

        BLAS runs on one thread: the products are small (a few hundred tokens x d), so threads cost
        more than they give, and one thread adds the same numbers in the same order on every machine.
        """
        from threadpoolctl import threadpool_limits  # training only, once a run starts

        with threadpool_limits(limits=1, user_api="blas"):
            return self._run(resume, on_step, on_epoch, stop)

    def _run(self, resume, on_step, on_epoch, stop) -> TrainResult:
        o, sentences = self.options, self.corpus.sentences
        model = (
            resume["model"] if resume else new_model(self.settings, self.dim, len(self.corpus.vocabulary), o.fix_values)
        )
        trainable = model.trainable(o.fix_values)
        adam = Adam(list(trainable), {k: v.shape for k, v in trainable.items()}, model.mask.dtype)
        if resume:
            adam.m, adam.v, adam.t = resume["adam_m"], resume["adam_v"], resume["step"]
            history = resume["history"]
        else:
            history = {"train": [], "held_out": [], "seconds": 0.0, "train_seconds": 0.0, "tokens": 0}
            history["held_out"].append({"step": 0, "epoch": 0, "loss": self.evaluate(model)})
        step = adam.t
        log_every = max(1, self.total_steps // 100)
        window = {"loss": 0.0, "steps": 0}
        started = time.perf_counter() - history["seconds"]
        interrupted = False
        for epoch in range(step // max(1, self.batches_per_epoch), o.epochs):
            order = _rng(o.seed, _ORDER, epoch).permutation(self.train_ids)  # (N_train,)
            groups = make_batches(sentences, order, o.batch_tokens)
            groups = [groups[i] for i in _rng(o.seed, _ORDER, epoch, 1).permutation(len(groups))]
            for position in range(step - epoch * self.batches_per_epoch, len(groups)):
                if stop():
                    interrupted = True
                    break
                tick = time.perf_counter()
                rng = _rng(o.seed, _MASKS, epoch, position)
                batch = fill_batch(sentences, groups[position], rng, o.mask_rate, self.sampling, o.negatives)
                loss, grads = batch_loss(model, batch, self.embeddings, self.key_bias)
                if not math.isfinite(loss):
                    raise DataError(f"the loss became {loss} at step {step}; try a smaller {{lr}}", "lr")
                if step == 0:
                    history["train"].append({"step": 0, "epoch": 0, "loss": loss})
                clip_gradients(grads, o.clip)
                adam.step(trainable, grads, learning_rate(step, self.total_steps, o.lr, o.warmup))
                step += 1
                history["tokens"] += int(batch.real.sum())
                history["train_seconds"] += time.perf_counter() - tick
                window["loss"] += loss
                window["steps"] += 1
                if step % log_every == 0 or step == self.total_steps:
                    history["train"].append(
                        {"step": step, "epoch": epoch + 1, "loss": window["loss"] / window["steps"]}
                    )
                    window = {"loss": 0.0, "steps": 0}
                if on_step:
                    on_step(
                        {
                            "step": step,
                            "total": self.total_steps,
                            "epoch": epoch + 1,
                            "loss": loss,
                            "tokens_per_second": history["tokens"] / max(history["train_seconds"], 1e-9),
                        }
                    )
            if interrupted:
                break
            history["held_out"].append({"step": step, "epoch": epoch + 1, "loss": self.evaluate(model)})
            if on_epoch:
                on_epoch({**history["held_out"][-1], "initial": history["held_out"][0]["loss"], "epochs": o.epochs})
        if interrupted and window["steps"]:
            history["train"].append({"step": step, "epoch": epoch + 1, "loss": window["loss"] / window["steps"]})
        history["seconds"] = time.perf_counter() - started
        state = {"adam_m": adam.m, "adam_v": adam.v, "step": step, "history": history}
        report = self.report(model, history, step, interrupted)
        return TrainResult(model, report, interrupted, state, self.corpus.vocabulary)

    def report(self, model: Model, history: dict, step: int, interrupted: bool) -> dict:
        """The ``ctxembed.train/1`` document."""
        o, stats = self.options, self.corpus.stats
        held = [entry for entry in history["held_out"] if entry["loss"] is not None]
        train_seconds = history["train_seconds"]
        return {
            "schema": TRAIN_SCHEMA,
            "vectors": vectors_record(self.store),
            "corpus": {
                "source": self.corpus_name,
                "sha256": self.corpus.sha256,
                **stats,
                "train_sentences": len(self.train_ids),
                "held_out_sentences": len(self.held_out_ids),
            },
            "settings": self.settings.as_dict(),
            "settings_summary": self.settings.summary(),
            "options": asdict(o),
            "learned": learned_names(model.arrays, o.fix_values),
            "steps": step,
            "total_steps": self.total_steps,
            "epochs_completed": step // max(1, self.batches_per_epoch) if self.batches_per_epoch else 0,
            "interrupted": interrupted,
            "seconds": round(history["seconds"], 3),
            "train_seconds": round(train_seconds, 3),
            "tokens": history["tokens"],
            "tokens_per_second": round(history["tokens"] / train_seconds, 1) if train_seconds > 0 else None,
            "train": history["train"],
            "held_out": history["held_out"],
            "final": {
                "train": history["train"][-1]["loss"] if history["train"] else None,
                "held_out": held[-1]["loss"] if held else None,
                "held_out_initial": held[0]["loss"] if held else None,
            },
        }
