"""Forward + backward of all-MiniLM-L6-v2 on the first N Brown lines, in sentences per CPU-second, one thread.

usage: encoder_backward_speed.py numpy|torch [N]     (prints one JSON line; the model must be installed)

Both sides run the same padded batches as benchmarks/minilm_speed.py (ctxembed's WordPiece ids, sorted
by length, 32 sentences a batch), in float32, and compute every weight's gradient of the same loss,
sum(last hidden state at the real pieces * R) with R a fixed random (N, D) per batch:

- numpy: ``encode(..., tape=True, keep_weights=False)`` then ``encode_backward`` (ctxembed.train.encoder_backprop),
  in a process set up as a ctxembed training process is (``ctxembed.train.memory.keep_freed_memory``);
- torch: BERT written with torch's eager operations (the ops of transformers' BertModel eager path,
  tests/test_encoder.py's torch_bert), autograd on every weight, gradients set to None between batches.

Only the reference imports torch; nothing in ctxembed does. Tokenising is outside the timed part; the
peak RSS of the process (``ru_maxrss``) is reported beside the load-time RSS, both in MB.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time

import numpy as np
from minilm_speed import brown_batches

QKV = ("query", "key", "value")


def directions(groups, dim: int) -> list[np.ndarray]:
    """A fixed random (N, D) float32 per batch: what the loss weighs the last hidden state by."""
    rng = np.random.default_rng(0)
    return [rng.standard_normal((int(real.sum()), dim)).astype(np.float32) for _, real in groups]


def numpy_runner(weights):
    from ctxembed.core.encoder import encode
    from ctxembed.train.encoder_backprop import encode_backward

    def run(ids, real, direction):
        out = encode(weights, ids, real, keep_weights=False, tape=True)
        return encode_backward(direction, out.tape, weights)  # d loss / d top = direction

    return run


def torch_runner(weights):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    config = weights.config
    t = {name: torch.tensor(np.array(array), requires_grad=True) for name, array in weights.to_tensors().items()}
    H, dh, D = config.heads, config.head_dim, config.hidden

    def forward(ids, real):
        ids_t, (B, T) = torch.from_numpy(ids), ids.shape
        x = t["embeddings.word_embeddings.weight"][ids_t] + t["embeddings.position_embeddings.weight"][:T]
        x = x + t["embeddings.token_type_embeddings.weight"][0]

        def norm(h, name):
            return F.layer_norm(h, (D,), t[name + ".weight"], t[name + ".bias"], config.eps)

        x = norm(x, "embeddings.LayerNorm")
        bias = torch.zeros(B, 1, 1, T).masked_fill(~torch.from_numpy(real)[:, None, None, :], -torch.inf)
        for n in range(config.layers):
            p = f"encoder.layer.{n}."

            def lin(h, name, p=p):
                return F.linear(h, t[p + name + ".weight"], t[p + name + ".bias"])

            q, k, v = (lin(x, f"attention.self.{n}").view(B, T, H, dh).transpose(1, 2) for n in QKV)
            w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + bias, dim=-1)
            context = (w @ v).transpose(1, 2).reshape(B, T, D)
            x = norm(x + lin(context, "attention.output.dense"), p + "attention.output.LayerNorm")
            x = norm(x + lin(F.gelu(lin(x, "intermediate.dense")), "output.dense"), p + "output.LayerNorm")
        return x

    def run(ids, real, direction):
        for tensor in t.values():
            tensor.grad = None
        top = forward(ids, real)[torch.from_numpy(real)]  # (N, D)
        (top * torch.from_numpy(direction)).sum().backward()
        return {name: tensor.grad for name, tensor in t.items()}

    return run


def main(engine: str, n: int) -> None:
    from threadpoolctl import threadpool_limits

    from ctxembed.core.encoder import EncoderWeights
    from ctxembed.vectors.bert import load_encoder
    from ctxembed.vectors.models import model_path

    threadpool_limits(1)
    if engine == "numpy":  # as a ctxembed training process starts (torch keeps its own allocator's defaults)
        from ctxembed.train.memory import keep_freed_memory

        keep_freed_memory()
    groups = brown_batches(n)
    config, stored = load_encoder(model_path("minilm"))
    weights = EncoderWeights.from_arrays(config, {k: np.array(a) for k, a in stored.arrays().items()})  # in memory
    signs = directions(groups, config.hidden)
    run = numpy_runner(weights) if engine == "numpy" else torch_runner(weights)
    loaded_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run(*groups[0], signs[0])  # warm-up
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu, wall = time.process_time(), time.perf_counter()
    for (ids, real), direction in zip(groups, signs, strict=True):
        run(ids, real, direction)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_SELF)
    system, faults = after.ru_stime - before.ru_stime, after.ru_minflt - before.ru_minflt  # page faults: system time
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pieces = int(sum(real.sum() for _, real in groups))
    record = {"engine": engine, "lines": n, "pieces": pieces, "cpu_s": cpu, "system_s": system, "faults": faults}
    record["wall_s"] = wall
    record |= {"sent_per_cpu_s": n / cpu, "loaded_rss_mb": loaded_mb, "peak_rss_mb": peak_mb}
    print(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 500)
