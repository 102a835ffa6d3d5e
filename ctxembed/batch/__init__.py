"""Batch: many sentences in, one JSON record out per line, in order; on a pool or a Dask cluster."""
