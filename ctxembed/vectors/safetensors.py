"""The safetensors format, read and written with NumPy alone: no pickle, no code run, no torch.

A file is 8 bytes (little-endian u64 N), N bytes of JSON header
``{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}``,
then the raw little-endian tensors. :func:`load` maps the file (``np.memmap``): a tensor is read from
disk only when used, and pages are shared between processes.
"""

from __future__ import annotations

import json
import math
import struct
from os import PathLike

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1"}
_NAMES = {np.dtype(code): name for name, code in DTYPES.items()}
MAX_HEADER = 100_000_000  # bytes: a larger header means the file is not safetensors


def read_header(path: str | PathLike) -> tuple[dict, int]:
    """A .safetensors file's header, checked for form, and where its tensors start (8 + header bytes).
    ValueError for a file that is not well-formed safetensors: short, a header that is not a JSON object of
    tensor entries (each a dict with a known ``dtype``, a ``shape`` of non-negative ints and two int
    ``data_offsets``), or a ``__metadata__`` that is not a dict of strings."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("too short for safetensors")
        (size,) = struct.unpack("<Q", head)
        if size > MAX_HEADER:
            raise ValueError(f"a header of {size} bytes: not safetensors")
        blob = f.read(size)
    if len(blob) < size:
        raise ValueError(f"the header is cut short ({len(blob)} of {size} bytes)")
    try:
        header = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"its header is not JSON ({type(error).__name__})") from None
    if not isinstance(header, dict):
        raise ValueError(f"its header is a JSON {type(header).__name__}, not an object")
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise ValueError("its __metadata__ is not a mapping of strings")
            continue
        if not isinstance(info, dict):
            raise ValueError(f"tensor {name}: its entry is a JSON {type(info).__name__}, not an object")
        if not isinstance(info.get("dtype"), str) or info["dtype"] not in DTYPES:
            raise ValueError(f"tensor {name}: dtype {info.get('dtype')!r} is not supported")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not isinstance(shape, list) or not all(_count(n) for n in shape):
            raise ValueError(f"tensor {name}: its shape {shape!r} is not a list of non-negative integers")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(_count(n) for n in offsets):
            raise ValueError(f"tensor {name}: its data_offsets {offsets!r} are not two non-negative integers")
    return header, 8 + size


def _count(value: object) -> bool:
    return type(value) is int and value >= 0  # not bool, not float, not str


def load(path: str | PathLike) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file, as read-only arrays over one memory map.
    ValueError for a file that is not well-formed safetensors (:func:`read_header`; offsets out of range)."""
    return mapped(path, *read_header(path))


def mapped(path: str | PathLike, header: dict, start: int) -> dict[str, np.ndarray]:
    """The tensors ``header`` (from :func:`read_header`) describes, over one memory map of the file."""
    buffer = np.memmap(path, dtype=np.uint8, mode="r")  # (file bytes,)
    return {
        name: buffer[begin:end].view(dtype).reshape(shape)
        for name, (begin, end, dtype, shape) in spans(header, start, len(buffer)).items()
    }


def spans(header: dict, start: int, size: int) -> dict[str, tuple[int, int, np.dtype, tuple[int, ...]]]:
    """Each tensor ``header`` (from :func:`read_header`) describes, as (begin, end, dtype, shape): where its
    bytes are in a file of ``size`` bytes. ValueError for offsets that do not fit the file or the shape."""
    found = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = np.dtype(DTYPES[info["dtype"]])
        if not 0 <= begin <= end <= size - start or end - begin != dtype.itemsize * math.prod(shape):
            raise ValueError(f"tensor {name}: its bytes {begin}..{end} do not fit the file or its shape {shape}")
        found[name] = (start + begin, start + end, dtype, shape)
    return found


def save(tensors: dict[str, np.ndarray], path: str | PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write arrays as .safetensors, names sorted and bytes little-endian: the same input gives the same bytes."""
    header: dict[str, object] = {}
    chunks, offset = [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        data = array.tobytes()
        header[name] = {
            "dtype": _NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = dict(metadata)
    blob = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    blob += b" " * (-len(blob) % 8)  # the tensors start on an 8-byte boundary
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for chunk in chunks:
            f.write(chunk)


def all_finite(numbers: np.ndarray) -> bool:
    """Whether every number of an array is finite: its sum is, in one pass with no temporary array (a sum is
    non-finite when one of its terms is); finite numbers whose sum overflows are looked at one by one."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum says so here, not on stderr
        return bool(np.isfinite(np.add.reduce(numbers, axis=None)) or np.isfinite(numbers).all())
