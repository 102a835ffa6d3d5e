"""Record, once, what torch + transformers compute for all-MiniLM-L6-v2 on a few sentences, so that
tests/test_minilm.py can check ctxembed's NumPy encoder against them without torch.

usage: python scripts/record_minilm_figures.py MODEL_FOLDER > tests/fixtures/minilm_torch.json

MODEL_FOLDER holds the upstream config.json, vocab.txt and model.safetensors (the installed folder holds
the encoder's own layout instead: ``benchmarks/minilm_speed.py torch-folder DIR`` writes torch's from it).
Per sentence it records the piece ids, and for every layer the hidden state of every piece (its first
8 dimensions and its norm) and the attention each piece pays to [CLS] in every head.
"""

from __future__ import annotations

import json
import sys

import torch
from tokenizers import BertWordPieceTokenizer
from transformers import BertModel

SENTENCES = ["we sat on the river bank", "I deposited money in the bank", "Fishermen don't sit; they stand.", "a"]


def main(folder: str) -> None:
    model = BertModel.from_pretrained(folder, attn_implementation="eager", add_pooling_layer=False).eval()
    tokenizer = BertWordPieceTokenizer(f"{folder}/vocab.txt", lowercase=True)
    records = []
    for text in SENTENCES:
        ids = torch.tensor([tokenizer.encode(text).ids])
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True, output_attentions=True)
        records.append(
            {
                "text": text,
                "ids": ids[0].tolist(),
                "hidden_head": [h[0, :, :8].tolist() for h in out.hidden_states],  # (L+1, P, 8)
                "hidden_norm": [h[0].norm(dim=-1).tolist() for h in out.hidden_states],  # (L+1, P)
                "to_cls": [a[0, :, :, 0].tolist() for a in out.attentions],  # (L, H, P)
            }
        )
    json.dump(
        {"model": "sentence-transformers/all-MiniLM-L6-v2", "torch": torch.__version__, "sentences": records},
        sys.stdout,
        indent=None,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
