"""The safetensors format, read and written with NumPy alone: no pickle, no code run, no torch.

A file is 8 bytes (little-endian u64 N), N bytes of JSON header
``{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}``,
then the raw little-endian tensors. :func:`load` maps the file (``np.memmap``): a tensor is read from
disk only when used, and pages are shared between processes.
"""

from __future__ import annotations

import json
import struct
from os import PathLike

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1"}
_NAMES = {np.dtype(code): name for name, code in DTYPES.items()}
MAX_HEADER = 100_000_000  # bytes: a larger header means the file is not safetensors


def load(path: str | PathLike) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file, as read-only arrays over one memory map.
    ValueError for a file that is not well-formed safetensors (short, bad header, offsets out of range)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("too short for safetensors")
        (size,) = struct.unpack("<Q", head)
        if size > MAX_HEADER:
            raise ValueError(f"a header of {size} bytes: not safetensors")
        try:
            header = json.loads(f.read(size))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"its header is not JSON ({error})") from None
    buffer = np.memmap(path, dtype=np.uint8, mode="r")  # (file bytes,)
    start = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        code = DTYPES.get(info.get("dtype"))
        if code is None:
            raise ValueError(f"tensor {name}: dtype {info.get('dtype')!r} is not supported")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = np.dtype(code)
        if not 0 <= begin <= end <= len(buffer) - start or end - begin != dtype.itemsize * int(np.prod(shape)):
            raise ValueError(f"tensor {name}: its bytes {begin}..{end} do not fit the file or its shape {shape}")
        tensors[name] = buffer[start + begin : start + end].view(dtype).reshape(shape)
    return tensors


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
