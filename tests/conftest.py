"""Shared fixtures: every test runs with its own cache directory and no CTXEMBED_VECTORS."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(cache))
    monkeypatch.setenv("GENSIM_DATA_DIR", str(tmp_path_factory.mktemp("gensim-data")))
    monkeypatch.delenv("CTXEMBED_VECTORS", raising=False)
    monkeypatch.delenv("CTXEMBED_DEBUG", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return cache
