"""Batch on Dask (ctxembed.batch.scale, docs/scale.md): partitions keep batch's line numbers, and a
LocalCluster of two worker processes writes what `ctxembed batch` writes, record for record."""

from __future__ import annotations

import random
import re

import pytest

from ctxembed.batch.scale import Partition, embed_partition, partitions, read_partition
from tests.cli_helpers import succeeds
from tests.conftest import FIXTURES, REPO

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


def corpus(path, n: int = 3000) -> None:
    """n lines: the awkward batch fixture's lines among plain sentences of the shipped vocabulary."""
    from ctxembed.vectors.sources import open_vectors

    words = open_vectors(None).words[:5000]
    rng = random.Random(15)
    awkward = (FIXTURES / "batch" / "lines.txt").read_bytes().split(b"\n")
    lines = [
        rng.choice(awkward) if rng.random() < 0.1 else " ".join(rng.choices(words, k=rng.randint(3, 20))).encode()
        for _ in range(n)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize("seed", range(40))
def test_partitions_cover_the_file_at_line_ends_and_number_its_lines(tmp_path, monkeypatch, seed):
    import ctxembed.batch.scale

    rng = random.Random(seed)
    lines = [bytes(rng.choice(b"ab \r") for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 30))]
    data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    monkeypatch.setattr(ctxembed.batch.scale, "_COUNT_BYTES", rng.randint(1, 16))  # cuts across read boundaries
    parts = partitions(str(path), rng.randint(1, 40))
    numbered = [(p.first_line + i, line) for p in parts for i, line in enumerate(read_partition(p))]
    assert b"".join(line for _, line in numbered) == data
    assert [n for n, _ in numbered] == list(range(1, len(numbered) + 1))
    assert all(line.endswith(b"\n") for _, line in numbered[:-1])  # a lone \r never ends a line
    assert [p.start for p in parts[1:]] == [p.stop for p in parts[:-1]]


def test_a_partition_gives_batch_records_with_batch_line_numbers(tmp_path):
    path = tmp_path / "corpus.txt"
    corpus(path, 300)
    expected = succeeds("batch", path, "--no-weights").stdout_bytes.splitlines(keepends=True)
    part = partitions(str(path), 4000)[2]
    records = [(line + "\n").encode() for line in embed_partition(part, weights=False)]
    assert records == expected[part.first_line - 1 : part.first_line - 1 + len(records)]
    assert len(records) > 10


def test_local_cluster_of_two_processes_writes_what_batch_writes(tmp_path):
    from ctxembed.batch.scale import embed_file

    path = tmp_path / "corpus.txt"
    corpus(path)
    expected = succeeds("batch", path).stdout_bytes
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        bag = embed_file(str(path), blocksize=path.stat().st_size // 6)
        assert bag.npartitions >= 6
        records = client.compute(bag).result()
        built = client.run(lambda: __import__("ctxembed.batch.embed").batch.embed._cached_engine.cache_info())
    assert ("\n".join(records) + "\n").encode() == expected
    assert len(records) == 3000 and len(built) == 2
    # each worker process built its Explorer at most once, whatever the number of tasks it ran
    assert all(info.misses <= 1 for info in built.values())
    assert sum(info.hits + info.misses for info in built.values()) == bag.npartitions
    assert re.search(rb'"error":"line is not valid UTF-8', expected)  # the awkward lines are in


def test_the_docs_example_runs(tmp_path, monkeypatch):
    """docs/scale.md's first example, on a small file, in a local scheduler."""
    text = (REPO / "docs" / "scale.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    path = tmp_path / "corpus.txt"
    corpus(path, 200)
    monkeypatch.chdir(tmp_path)
    example = example.replace('Client("tcp://scheduler:8786")', "Client(processes=False, dashboard_address=None)")
    namespace: dict = {}
    exec(compile(example, "docs/scale.md", "exec"), namespace)  # noqa: S102 - our own documentation
    written = b"".join(p.read_bytes() for p in sorted((tmp_path / "out").glob("*.jsonl")))
    assert written == succeeds("batch", path, "--no-weights").stdout_bytes


def test_partition_is_a_plain_tuple_that_pickles():
    import pickle

    part = Partition("corpus.txt", 0, 10, 1)
    assert pickle.loads(pickle.dumps(part)) == part


def test_local_cluster_to_parquet_equals_the_single_machine_file(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from ctxembed.batch.scale import to_parquet

    path = tmp_path / "corpus.txt"
    corpus(path, 600)
    single = tmp_path / "single.parquet"
    succeeds("batch", path, "--word", "bank", "--format", "parquet", "--out", single)
    folder = tmp_path / "parts"
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        bag = to_parquet(str(path), str(folder), blocksize=path.stat().st_size // 4, word="bank")
        written = bag.compute()
    assert len(written) == bag.npartitions >= 4 and written == sorted(written)  # one part per partition
    expected, got = pq.read_table(single), pq.read_table(folder)
    assert got.num_rows == 600 and got.schema.remove_metadata() == expected.schema.remove_metadata()
    assert got.to_pylist() == expected.to_pylist()
    assert got.schema.metadata[b"ctxembed"] == expected.schema.metadata[b"ctxembed"]


def test_local_cluster_runs_the_trained_model_as_batch_does(tmp_path, minilm_folder):
    """model="minilm" on two worker processes: embed_file's records are batch's bytes, and to_parquet's
    parts read back as batch's Parquet file; one cluster for both."""
    pq = pytest.importorskip("pyarrow.parquet")
    from ctxembed.batch.scale import embed_file, to_parquet

    path = tmp_path / "corpus.txt"
    path.write_bytes((FIXTURES / "batch" / "lines.txt").read_bytes()[:1500])
    lines = path.read_bytes().count(b"\n") + 1
    expected = succeeds("batch", path, "--model", "minilm", "--no-weights", "--word", "the").stdout_bytes
    single = tmp_path / "single.parquet"
    succeeds("batch", path, "--model", "minilm", "--word", "the", "--format", "parquet", "--out", single)
    folder = tmp_path / "parts"
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        bag = embed_file(str(path), blocksize=300, model="minilm", weights=False, word="the")
        records = client.compute(bag).result()
        written = to_parquet(str(path), str(folder), blocksize=300, model="minilm", word="the").compute()
    assert bag.npartitions >= 4 and len(written) == bag.npartitions
    assert ("\n".join(records) + "\n").encode() == expected and len(records) == lines
    got, single_table = pq.read_table(folder), pq.read_table(single)
    assert got.num_rows == lines and got.to_pylist() == single_table.to_pylist()
    assert got.schema.metadata[b"ctxembed"] == single_table.schema.metadata[b"ctxembed"]


def test_the_docs_trained_model_example_runs(tmp_path, monkeypatch, minilm_folder):
    """docs/scale.md's example of the trained model, on a small file, in a local scheduler."""
    pq = pytest.importorskip("pyarrow.parquet")
    text = (REPO / "docs" / "scale.md").read_text(encoding="utf-8")
    section = text[text.index("## The trained model") :]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "corpus.txt"
    path.write_bytes((FIXTURES / "batch" / "lines.txt").read_bytes()[:1200])
    monkeypatch.chdir(tmp_path)
    example = example.replace('Client("tcp://scheduler:8786")', "Client(processes=False, dashboard_address=None)")
    exec(compile(example, "docs/scale.md", "exec"), {})  # noqa: S102 - our own documentation
    written = b"".join(p.read_bytes() for p in sorted((tmp_path / "minilm").glob("*.jsonl")))
    args = ("--model", "minilm", "--word", "bank")
    assert written == succeeds("batch", path, *args, "--no-weights").stdout_bytes
    succeeds("batch", path, *args, "--format", "parquet", "--out", tmp_path / "single.parquet")
    parts, single = pq.read_table(tmp_path / "minilm-parts"), pq.read_table(tmp_path / "single.parquet")
    assert parts.num_rows > 20 and parts.to_pylist() == single.to_pylist()
