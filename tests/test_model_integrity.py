"""A damaged or malformed installed model is refused in one line naming the reinstall command, never read
silently (issue 45): the cheap checks of each open, the full check when a file changed, non-finite
weights, and files that are not regular files. Each case damages a copy of the installed model: the
untouched files are symbolic links to the real ones (read, never written)."""

from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
import pytest

from ctxembed.errors import DataError
from ctxembed.vectors import bert, integrity, models, safetensors
from tests.cli_helpers import fails, invoke

REINSTALL = "reinstall with `ctxembed models install minilm`"


def open_model(name: str):
    """What the engine opens: the BERT folder with its checks, and the neighbour store."""
    config, weights, vocab = bert.load_bert(models.models_dir() / name)
    return config, weights, vocab, integrity.open_store(name, models.models_dir() / name / models.NEIGHBOURS, config)


BANK = 2924  # "bank" in BERT's uncased vocabulary


@pytest.fixture
def copy(minilm_folder, tmp_path, monkeypatch):
    """A models folder whose minilm links to the installed files, with an installed.json recording the
    real files' sizes and mtimes (as an install of this version writes it), so opening it is cheap."""
    folder = tmp_path / "models" / "minilm"
    folder.mkdir(parents=True)
    for f in minilm_folder.iterdir():
        (folder / f.name).symlink_to(f)
    record = json.loads((minilm_folder / models.INSTALLED).read_text())
    record["files"] = {f: models.recorded_stat(minilm_folder / f) for f in bert.FILES}
    (folder / models.INSTALLED).unlink()
    (folder / models.INSTALLED).write_text(json.dumps(record))
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    return folder


def own(folder, name, keep_mtime=True):
    """Replace the link ``name`` by a copy of its file; with ``keep_mtime``, the copy gets the original's
    mtime back after each change (see :func:`done`), as a careful damage would."""
    source = (folder / name).resolve()
    (folder / name).unlink()
    shutil.copyfile(source, folder / name)
    return folder / name


def done(path, minilm_folder):
    """Put the original file's mtime back on ``path``: only the cheap checks stand between it and a run."""
    found = (minilm_folder / path.name).stat()
    os.utime(path, ns=(found.st_atime_ns, found.st_mtime_ns))


def edit_header(path, change):
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    change(header)
    blob = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    blob += b" " * max(0, size - len(blob))
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data[8 + size :])


def edit_tensor(path, name, change):
    header, start = safetensors.read_header(path)
    begin, end = header[name]["data_offsets"]
    with open(path, "r+b") as f:
        f.seek(start + begin)
        array = np.frombuffer(f.read(end - begin), dtype="<f4").reshape(header[name]["shape"]).copy()
        change(array)
        f.seek(start + begin)
        f.write(array.tobytes())


def swap_offsets(header):
    a, b = header["layers.0.b_o"], header["layers.0.norm1.bias"]  # both (384,): only the offsets tell
    a["data_offsets"], b["data_offsets"] = b["data_offsets"], a["data_offsets"]


def edit_config(**values):
    def change(path):
        config = json.loads(path.read_text())
        config.update(values)
        path.write_text(json.dumps(config, indent=2))

    return change


HEADER_CASES = {
    "two tensors swapped": (swap_offsets, "is not where the converter put it"),
    "entries a list": (lambda h: h.__setitem__("word", [1, 2]), "not an object"),
    "shape an int": (lambda h: h["word"].__setitem__("shape", 5), "shape 5"),
    "shape a string": (lambda h: h["word"].__setitem__("shape", "30522,384"), "shape '30522,384'"),
    "string offsets": (lambda h: h["word"].__setitem__("data_offsets", ["0", "4"]), "data_offsets"),
    "metadata a list": (lambda h: h.__setitem__("__metadata__", ["x"]), "__metadata__"),
    "a float16 tensor": (lambda h: h["segment"].__setitem__("dtype", "F16"), "segment"),
}


@pytest.mark.parametrize("case", HEADER_CASES)
def test_a_damaged_header_is_refused_at_open(copy, minilm_folder, case):
    change, reason = HEADER_CASES[case]
    path = own(copy, bert.WEIGHTS)
    edit_header(path, change)
    done(path, minilm_folder)
    with pytest.raises(DataError, match=f"{path}.*is damaged") as refused:
        open_model("minilm")
    assert reason in refused.value.message and refused.value.message.endswith(REINSTALL)


CONFIG_CASES = {
    "6 heads": (edit_config(num_attention_heads=6), "num_attention_heads is 6"),
    "1 layer": (edit_config(num_hidden_layers=1), "num_hidden_layers is 1"),
    "a huge epsilon": (edit_config(layer_norm_eps=1e6), "layer_norm_eps"),
    "0 heads": (edit_config(num_attention_heads=0), "num_attention_heads is 0"),
    "a string hidden size": (edit_config(hidden_size="384"), "hidden_size is '384'"),
    "a list": (lambda p: p.write_text("[1, 2]"), "not an object"),
    "10,000 levels": (lambda p: p.write_text("[" * 10_000 + "]" * 10_000), "not JSON"),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_a_config_off_the_pinned_values_is_refused(copy, minilm_folder, case):
    """Even with its mtime put back (so no hash is taken), the config is held to the pinned values."""
    change, reason = CONFIG_CASES[case]
    path = own(copy, "config.json")
    change(path)
    record = json.loads((copy / models.INSTALLED).read_text())
    record["files"]["config.json"]["bytes"] = path.stat().st_size  # as if nothing had changed
    (copy / models.INSTALLED).write_text(json.dumps(record))
    done(path, minilm_folder)
    with pytest.raises(DataError, match="config.json is damaged") as refused:
        open_model("minilm")
    assert reason in refused.value.message and refused.value.message.endswith(REINSTALL)


NON_FINITE = {
    "NaN in layer 0's q/k/v": ("layers.0.W_qkv", lambda a: a.__setitem__((5, 7), np.nan)),
    "NaN in layer 5's feed-forward": ("layers.5.W_1", lambda a: a.__setitem__((3, 9), np.nan)),
    "an infinite LayerNorm gain": ("layers.2.norm1.gain", lambda a: a.__setitem__(4, np.inf)),
}


@pytest.mark.parametrize("case", NON_FINITE)
def test_a_non_finite_weight_is_refused_at_open_even_with_its_mtime_back(copy, minilm_folder, case):
    name, change = NON_FINITE[case]
    path = own(copy, bert.WEIGHTS)
    edit_tensor(path, name, change)
    done(path, minilm_folder)
    with pytest.raises(DataError, match=f"tensor {name} holds a non-finite number"):
        open_model("minilm")


def test_a_nan_row_for_bank_is_refused_when_a_sentence_uses_it(copy, minilm_folder):
    """The word embeddings are not summed at each open (a sentence reads a few rows): the NaN reaches the
    hidden states, which the engine refuses; a sentence without "bank" runs as before."""
    path = own(copy, bert.WEIGHTS)
    edit_tensor(path, "word", lambda a: a.__setitem__(BANK, np.nan))
    done(path, minilm_folder)
    line = fails(1, "attend", "we sat on the river bank", "--model", "minilm", "--json")
    assert "encoder.safetensors is damaged (a weight gives non-finite numbers)" in line and REINSTALL in line
    assert invoke("attend", "we sat on the grass", "--model", "minilm", "--json").exit_code == 0


@pytest.mark.parametrize(
    "name, change",
    [
        ("word", lambda a: a.__setitem__(BANK, 0)),  # a zeroed row for "bank"
        ("layers.3.W_o", lambda a: a.__imul__(1000)),  # a layer multiplied by 1,000
    ],
)
def test_a_file_written_since_install_is_hashed_and_refused(copy, minilm_folder, name, change):
    """Finite damage changes no size and no header: its new mtime sends the file to the full check."""
    path = own(copy, bert.WEIGHTS)
    edit_tensor(path, name, change)
    line = fails(1, "attend", "we sat on the river bank", "--model", "minilm", "--json")
    assert "encoder.safetensors is damaged (its sha256 is not the one recorded at install)" in line
    assert line.endswith(REINSTALL)
    done(path, minilm_folder)  # its mtime put back: each open passes it, `models verify` does not
    line = fails(1, "models", "verify", "minilm")
    assert "sha256 is not the one recorded" in line and line.endswith(REINSTALL)


def test_the_full_check_runs_once_per_changed_file_and_is_remembered(copy, minilm_folder, monkeypatch):
    for name in bert.FILES:
        own(copy, name)  # new mtimes: none is as installed.json recorded
    hashed = []
    real = models.sha256_of
    monkeypatch.setattr(models, "sha256_of", lambda path, *each: hashed.append(path.name) or real(path, *each))
    open_model("minilm")
    assert sorted(hashed) == sorted(bert.FILES)
    hashed.clear()
    open_model("minilm")  # the stamps in the cache folder: nothing hashed again
    assert hashed == []
    (copy / "vocab.txt").touch()
    open_model("minilm")
    assert hashed == ["vocab.txt"]


@pytest.mark.parametrize("name", [*bert.FILES, models.INSTALLED])
def test_a_fifo_in_place_of_a_model_file_is_refused_without_hanging(copy, name):
    (copy / name).unlink()
    os.mkfifo(copy / name)
    line = fails(1, "attend", "we sat on the river bank", "--model", "minilm", "--json")
    assert f"{copy / name} is damaged (not a regular file)" in line and line.endswith(REINSTALL)


@pytest.mark.parametrize(
    "record, reason",
    [
        ({"format": models.FORMAT}, "no sha256 for each converted file"),
        ('{"format": 2, "x": ' + "[" * 10_000 + "]" * 10_000 + "}", "not JSON"),
        ([1, 2], "a JSON list, not an object"),
    ],
)
def test_a_malformed_installed_json_is_one_line(copy, record, reason):
    (copy / models.INSTALLED).write_text(record if isinstance(record, str) else json.dumps(record))
    line = fails(1, "attend", "we sat on the river bank", "--model", "minilm", "--json")
    assert f"installed.json is damaged ({reason}" in line and line.endswith(REINSTALL)
    assert not models.is_installed("minilm")
    assert invoke("models", "list").exit_code == 0


def test_a_vocabulary_with_extra_ids_is_refused(copy, minilm_folder):
    path = own(copy, "vocab.txt")
    path.write_text(path.read_text() + "zzextra\n")
    line = fails(1, "attend", "we sat on the river bank", "--model", "minilm")
    assert "vocab.txt is damaged" in line and line.endswith(REINSTALL)
    record = json.loads((copy / models.INSTALLED).read_text())
    record["files"]["vocab.txt"] = models.recorded_stat(path)  # as if installed so: the count still refuses
    (copy / models.INSTALLED).write_text(json.dumps(record))
    with pytest.raises(DataError, match="30,523 pieces for 30,522 embeddings"):
        open_model("minilm")


def test_the_neighbour_stores_own_errors_name_the_reinstall(copy, minilm_folder):
    path = own(copy, models.NEIGHBOURS)
    data = bytearray(path.read_bytes())
    data[-5000:] = bytes(5000)  # the matrix's last block: a checksum error when read
    path.write_bytes(bytes(data))
    done(path, minilm_folder)
    line = fails(1, "neighbors", "we sat on the river bank", "--model", "minilm", "--word", "bank")
    assert "checksum mismatch" in line and line.endswith(REINSTALL)
    path.write_bytes(bytes(data[:1000]))
    line = fails(1, "neighbors", "we sat on the river bank", "--model", "minilm", "--word", "bank")
    assert "words.ctxv" in line and line.endswith(REINSTALL)


def test_verify_passes_an_intact_model_and_names_what_it_checked(copy):
    result = invoke("models", "verify", "minilm", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "model": "minilm",
        "path": str(copy),
        "files": list(bert.FILES),
        "verified": True,
    }


@pytest.mark.parametrize("name", ["gpt-9", "glove"])
def test_verify_of_a_model_with_nothing_to_verify_says_so(tmp_path, monkeypatch, name):
    """`models verify` of a name that is not installed and no package installs (or the static glove model,
    which has no files to check) says there is no installed model of that name: not "to install"."""
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    line = f"ctxembed: error: no installed model {name!r} to verify (known: minilm)"
    assert fails(2, "models", "verify", name) == line
    assert fails(2, "models", "install", name) == f"ctxembed: error: no model {name!r} to install (known: minilm)"


@pytest.mark.parametrize("case", HEADER_CASES)
def test_safetensors_refuses_a_malformed_header_with_a_value_error(tmp_path, case):
    """Without the model: a small file whose header is malformed is a ValueError (never an AttributeError,
    a TypeError or a reshape to a wrong shape), so every reader of safetensors gives one line."""
    tensors = {
        "word": np.ones((3, 2), np.float32),
        "segment": np.zeros(2, np.float32),
        "layers.0.b_o": np.zeros(4, np.float32),
        "layers.0.norm1.bias": np.ones(4, np.float32),
    }
    path = tmp_path / "x.safetensors"
    safetensors.save(tensors, path, {"format": "2"})
    assert set(safetensors.load(path)) == set(tensors)
    change, _ = HEADER_CASES[case]
    edit_header(path, change)
    if case in ("two tensors swapped", "a float16 tensor"):  # well-formed: the model's own checks refuse these
        return
    with pytest.raises(ValueError):
        safetensors.load(path)


# ---------------------------------------------------------------- the same checks without the real model


@pytest.fixture
def tiny_copy(tiny_model, tmp_path, monkeypatch):
    """A copy of the installed tiny model (tests/tiny_model.py), mtimes kept: its record's sizes and mtimes
    match, so opening it is the cheap path."""
    root = tmp_path / "models"
    shutil.copytree(tiny_model.folder, root / tiny_model.name, copy_function=shutil.copy2)
    monkeypatch.setenv("CTXEMBED_MODELS", str(root))
    return root / tiny_model.name


def put_back(path, stat):
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_the_tiny_models_header_and_weights_are_checked_at_open(tiny_copy):
    name = tiny_copy.name
    reinstall = f"reinstall with `ctxembed models install {name}`"
    path = tiny_copy / bert.WEIGHTS
    original, before = path.read_bytes(), path.stat()
    bert.load_bert(tiny_copy)  # intact
    edit_header(path, swap_offsets)
    put_back(path, before)
    with pytest.raises(DataError, match="tensor layers.0.b_o is not where the converter put it") as refused:
        bert.load_bert(tiny_copy)
    assert refused.value.message.endswith(reinstall)
    path.write_bytes(original)
    edit_tensor(path, "layers.1.W_2", lambda a: a.__setitem__((0, 0), np.inf))
    put_back(path, before)
    with pytest.raises(DataError, match="tensor layers.1.W_2 holds a non-finite number"):
        bert.load_bert(tiny_copy)
    edit_tensor(path, "layers.1.W_2", lambda a: a.__setitem__((0, 0), 0.5))  # finite, and its mtime is new
    with pytest.raises(DataError, match="its sha256 is not the one recorded at install"):
        bert.load_bert(tiny_copy)


def test_the_tiny_models_files_must_be_regular(tiny_copy):
    (tiny_copy / "config.json").unlink()
    os.mkfifo(tiny_copy / "config.json")
    line = fails(1, "attend", "we sat on the river bank", "--model", tiny_copy.name, "--json")
    assert f"{tiny_copy / 'config.json'} is damaged (not a regular file)" in line


def test_verify_hashes_each_file_once_when_the_cache_cannot_remember_it(tiny_copy, tmp_path, monkeypatch):
    """`models verify` checks every file in full, then opens the folder with the family's loader: a file it
    has just hashed is not hashed (nor its weights summed) again by that open, even when its size or mtime
    is not the one installed.json recorded (a copied folder) and the cache folder cannot be written."""
    from ctxembed.vectors import layouts

    for file in bert.FILES:
        (tiny_copy / file).touch()  # new mtimes: each open must check these files in full
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(tmp_path / "not-a-folder" / "cache"))  # the stamps cannot be written
    hashed, summed = [], []
    real_sha = models.sha256_of
    monkeypatch.setattr(models, "sha256_of", lambda path, *each: hashed.append(path.name) or real_sha(path, *each))

    class Summing(integrity.FiniteCheck):
        def __init__(self, path, size):
            summed.append(path.name)
            super().__init__(path, size)

    monkeypatch.setattr(integrity, "FiniteCheck", Summing)
    assert layouts.verify(tiny_copy.name)["verified"] is True
    assert sorted(hashed) == sorted(bert.FILES) and summed == [bert.WEIGHTS]


def bytes_read() -> int:
    """What this process has read through read calls so far (Linux: /proc/self/io's rchar)."""
    fields = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    return int(fields["rchar"])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts bytes read with /proc/self/io")
def test_verify_reads_the_weights_once_for_their_hash_and_their_finite_check(tiny_copy, monkeypatch):
    """`models verify` checks every weight finite on the bytes it hashes: the weights file is read through
    once (its bytes and its header) and never mapped to be summed on a second pass."""
    path = tiny_copy / bert.WEIGHTS
    record = models.read_record(tiny_copy.name, tiny_copy)
    header_bytes = safetensors.read_header(path)[1]
    integrity.verify_files(tiny_copy.name, tiny_copy, record, [bert.WEIGHTS], bert.WEIGHTS)  # lazy imports done
    mapped, real_memmap = [], np.memmap
    monkeypatch.setattr(np, "memmap", lambda file, *rest, **kw: mapped.append(file) or real_memmap(file, *rest, **kw))
    before = bytes_read()
    integrity.verify_files(tiny_copy.name, tiny_copy, record, [bert.WEIGHTS], bert.WEIGHTS)
    read = bytes_read() - before
    assert mapped == []
    assert path.stat().st_size <= read < path.stat().st_size + header_bytes + 4096  # + the header, + /proc/self/io


def test_the_finite_check_reads_numbers_cut_by_the_end_of_a_block(tmp_path):
    """The check is fed the file's bytes in blocks that may cut a number in two (here a float32 tensor after
    a float16 one begins 2 bytes off a multiple of 4, and the blocks are 5 bytes): each number is checked
    whole, a NaN cut in two included; finite numbers whose sum overflows are not refused."""
    path = tmp_path / "cut.safetensors"

    def verdict(second):
        safetensors.save({"a": np.ones(3, np.float16), "b": np.array(second, np.float32)}, path)
        data = path.read_bytes()
        finite = integrity.FiniteCheck(path, len(data))
        for offset in range(0, len(data), 5):
            finite.feed(offset, data[offset : offset + 5])
        return finite.problem

    assert verdict([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    begin = safetensors.spans(*safetensors.read_header(path), path.stat().st_size)["b"][0]
    assert begin % 4 == 2  # its numbers straddle the 5-byte blocks in every way
    for at in range(5):
        numbers = [1.0, 2.0, 3.0, 4.0, 5.0]
        numbers[at] = np.nan
        assert verdict(numbers) == "tensor b holds a non-finite number"
    assert verdict([3e38, 3e38, -np.inf, 0.0, 0.0]) == "tensor b holds a non-finite number"
    assert verdict([3e38, 3e38, 3e38, 0.0, 0.0]) is None  # their float32 sum is an infinity; each is finite


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda path: path.unlink(), "is not installed: run `ctxembed models install tiny`"),
        (lambda path: path.write_text("[1, 2]"), "installed.json is damaged (a JSON list, not an object)"),
        (lambda path: path.write_text('{"format": 1}'), "converted by another version of ctxembed"),
    ],
)
def test_model_path_raises_the_records_own_error_once(tiny_copy, damage, reason):
    """model_path lets read_record's DataError through as it is (not its message caught and raised anew);
    install_problem, for the callers that ask, gives the same line."""
    damage(tiny_copy / models.INSTALLED)
    with pytest.raises(DataError) as caught:
        models.model_path(tiny_copy.name)
    assert reason in caught.value.message
    assert caught.traceback[-1].name in {"read_record", "read_small"}  # raised where the record is read
    assert models.install_problem(tiny_copy.name, tiny_copy) == caught.value.message
    assert not models.is_installed(tiny_copy.name)


def test_every_open_judges_a_weight_finite_as_install_and_verify_do(tmp_path):
    """bert.check_used_finite (each open) and integrity.FiniteCheck (install, verify) share one test of the
    numbers: finite weights whose float32 sum overflows pass both (an open refused them before, where
    install had taken them); a NaN or an infinity is refused by both."""
    from types import SimpleNamespace

    from ctxembed.vectors.bert import check_used_finite

    def opened(numbers):
        weights = SimpleNamespace(arrays=lambda: {"word": np.array([np.nan]), "l0.W_q": np.array(numbers, np.float32)})
        try:
            check_used_finite("tiny", tmp_path, weights)  # the word embeddings are checked in the states
        except DataError as error:
            return error.message
        return None

    assert opened(np.full(1000, 1e36)) is None  # their sum is an infinity; each number is finite
    assert "tensor l0.W_q holds a non-finite number" in opened([1.0, np.inf])
    assert "tensor l0.W_q holds a non-finite number" in opened([np.nan, 1.0])
