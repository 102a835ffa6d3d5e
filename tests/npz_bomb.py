"""A deflated .npz whose one member declares a huge array of zeros: a few MB on disk, gigabytes when
expanded. Built in about a second from one compressed block repeated (zlib's full flush makes each
block independent), with a zeroed CRC: a reader that checks the header refuses it before the CRC
matters, and one that does not expands everything first."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def write_npz_bomb(path: Path, name: str = "W_query", shape: tuple[int, int] = (20000, 20000)) -> Path:
    header = _npy_header(shape)
    size = len(header) + shape[0] * shape[1] * 8
    assert size < 1 << 32  # no zip64 records needed
    chunk = 1 << 22
    repeats, rest = divmod(shape[0] * shape[1] * 8, chunk)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)]
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    parts += [block] * repeats
    parts.append(compressor.compress(bytes(rest)) + compressor.flush())
    data = b"".join(parts)
    member = f"{name}.npy".encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, 0, len(data), size, len(member), 0)
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, 0, len(data), size, len(member), 0, 0, 0, 0, 0, 0
    )
    offset = len(local) + len(member) + len(data)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(member), offset, 0)
    path.write_bytes(local + member + data + central + member + end)
    return path


def _npy_header(shape) -> bytes:
    import io

    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": "<f8", "fortran_order": False, "shape": tuple(shape)})
    return out.getvalue()
