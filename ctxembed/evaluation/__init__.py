"""Evaluation on human-labelled data (WiC, SCWS, the senses suite), and fitting a layer mix."""
