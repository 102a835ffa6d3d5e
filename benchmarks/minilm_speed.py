"""Sentences per CPU-second of all-MiniLM-L6-v2 on the first N Brown lines, one thread, attention kept.

usage: minilm_speed.py numpy [N] | torch N DIR   (prints one JSON line; the model must be installed)
       minilm_speed.py torch-folder DIR     (writes the installed model in torch's layout into DIR, prints DIR)
       minilm_speed.py stages [N]           (CPU seconds of each step of the NumPy encoder, one JSON line)

Both sides get the same piece ids (ctxembed's WordPiece, equal to Hugging Face's), sorted by length
and padded in batches of 32, and return every hidden state and every attention matrix: the NumPy
encoder (ctxembed.core.encoder) against transformers' BertModel in eager mode (torch's SDPA returns
no attention weights). Tokenising is outside the timed part. ctxembed stores the model in its encoder's
own layout, so torch reads a folder written back in Hugging Face's (:func:`torch_folder`).
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
BATCH = 32


def batches(lines: list[str], vocab) -> list[tuple[np.ndarray, np.ndarray]]:
    pieces = [[vocab.cls_id, *(p.id for p in vocab.encode(line)), vocab.sep_id][:512] for line in lines]
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    out = []
    for start in range(0, len(order), BATCH):
        chunk = [pieces[i] for i in order[start : start + BATCH]]
        T = max(map(len, chunk))
        ids = np.zeros((len(chunk), T), np.int64)  # (B, T)
        real = np.zeros((len(chunk), T), bool)  # (B, T)
        for row, p in enumerate(chunk):
            ids[row, : len(p)], real[row, : len(p)] = p, True
        out.append((ids, real))
    return out


def torch_folder(into: Path) -> Path:
    """The installed model as a Hugging Face folder (model.safetensors in torch's layout, config.json,
    vocab.txt), written once into ``into``: what BertModel.from_pretrained reads."""
    import shutil

    from ctxembed.vectors import safetensors
    from ctxembed.vectors.bert import load_encoder
    from ctxembed.vectors.models import model_path

    folder = model_path("minilm")
    if not (into / "model.safetensors").is_file():
        into.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "vocab.txt"):
            shutil.copyfile(folder / name, into / name)
        partial = into / "model.safetensors.part"
        safetensors.save(load_encoder(folder)[1].to_tensors(), partial, {"format": "pt"})
        partial.rename(into / "model.safetensors")
    return into


def brown_batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first n Brown lines as the padded batches both engines run."""
    from ctxembed.vectors.models import model_path
    from ctxembed.vectors.wordpiece import WordPiece

    with gzip.open(REPO / "data" / "brown.txt.gz", "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(n)]
    return batches(lines, WordPiece.from_file(model_path("minilm") / "vocab.txt"))


STEPS = ("embed", "project_qkv", "attention", "attention_out", "add_and_norm", "feed_forward", "gelu")


def stages(n: int) -> None:
    """CPU seconds spent in each step of ctxembed.core.encoder over the first n lines (gelu is part of
    feed_forward; "rest" is encode's own work: copying the weights out, the padding bias)."""
    import collections

    from threadpoolctl import threadpool_limits

    from ctxembed.core import encoder
    from ctxembed.vectors.bert import load_encoder
    from ctxembed.vectors.models import model_path

    spent = collections.Counter()

    def timed(name, function):
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.process_time() - start

        return wrapper

    for name in STEPS:
        setattr(encoder, name, timed(name, getattr(encoder, name)))
    threadpool_limits(1)
    groups = brown_batches(n)
    weights = load_encoder(model_path("minilm"))[1]
    encoder.encode(weights, *groups[0])  # warm-up
    spent.clear()
    cpu = time.process_time()
    for ids, real in groups:
        encoder.encode(weights, ids, real)
    cpu = time.process_time() - cpu
    rest = cpu - sum(seconds for name, seconds in spent.items() if name != "gelu")
    print(json.dumps({"lines": n, "cpu_s": cpu, "steps_s": {name: spent[name] for name in STEPS}, "rest_s": rest}))


def main(engine: str, n: int) -> None:
    from threadpoolctl import threadpool_limits

    from ctxembed.vectors.models import model_path

    folder = model_path("minilm")
    groups = brown_batches(n)
    if engine == "numpy":
        from ctxembed.core.encoder import encode
        from ctxembed.vectors.bert import load_encoder

        threadpool_limits(1)
        _, weights = load_encoder(folder)

        def run(ids, real):
            return encode(weights, ids, real)
    else:
        import torch
        from transformers import BertModel

        torch.set_num_threads(1)
        hf = torch_folder(Path(sys.argv[3]))
        model = BertModel.from_pretrained(hf, attn_implementation="eager", add_pooling_layer=False).eval()

        def run(ids, real):
            with torch.inference_mode():
                return model(
                    input_ids=torch.from_numpy(ids),
                    attention_mask=torch.from_numpy(real.astype(np.int64)),
                    output_hidden_states=True,
                    output_attentions=True,
                )

    run(*groups[0])  # warm-up
    cpu, wall = time.process_time(), time.perf_counter()
    for ids, real in groups:
        run(ids, real)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    pieces = int(sum(real.sum() for _, real in groups))
    print(
        json.dumps(
            {"engine": engine, "lines": n, "pieces": pieces, "cpu_s": cpu, "wall_s": wall, "sent_per_cpu_s": n / cpu}
        )
    )


if __name__ == "__main__":
    if sys.argv[1] == "torch-folder":
        print(torch_folder(Path(sys.argv[2])))
    elif sys.argv[1] == "stages":
        stages(int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
    else:
        main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
