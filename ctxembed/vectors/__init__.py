"""Static vectors: stores, foreign formats, the tokenizer, lookups, weights files, corpora and caches."""
