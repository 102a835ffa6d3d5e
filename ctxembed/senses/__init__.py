"""Senses: find a word's occurrences in a corpus, cluster their contextual vectors, score against labels."""
