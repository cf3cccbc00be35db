"""Packed numpy arrays: dtype + shape + raw bytes, never lists of scalars.

One format for every boundary that moves arrays (Redis replay payloads, gRPC messages), so
token ids and floats cost their raw size plus a few header bytes.
"""

from __future__ import annotations

import struct

import numpy as np

# dtypes allowed across process boundaries; anything else is a programming error upstream.
ALLOWED_DTYPES = frozenset({"bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"})

_HEADER = struct.Struct("<B B")  # dtype-name length, ndim


def pack_array(array: np.ndarray) -> bytes:
    """Serialise an array as ``[len(dtype), ndim, dtype, shape (uint64 each), C-order bytes]``."""
    array = np.ascontiguousarray(array)
    dtype = array.dtype.name
    if dtype not in ALLOWED_DTYPES:
        raise ValueError(f"array dtype {dtype!r} cannot be packed; allowed: {sorted(ALLOWED_DTYPES)}")
    dtype_bytes = dtype.encode()
    header = _HEADER.pack(len(dtype_bytes), array.ndim) + dtype_bytes
    shape = struct.pack(f"<{array.ndim}Q", *array.shape)
    return header + shape + array.tobytes()


def unpack_array(data: bytes | memoryview, offset: int = 0) -> tuple[np.ndarray, int]:
    """Inverse of :func:`pack_array`; returns the array (a copy) and the offset just past it."""
    view = memoryview(data)
    dtype_len, ndim = _HEADER.unpack_from(view, offset)
    offset += _HEADER.size
    dtype = bytes(view[offset : offset + dtype_len]).decode()
    if dtype not in ALLOWED_DTYPES:
        raise ValueError(f"packed array has unsupported dtype {dtype!r}")
    offset += dtype_len
    shape = struct.unpack_from(f"<{ndim}Q", view, offset)
    offset += 8 * ndim
    count = int(np.prod(shape, dtype=np.int64)) if ndim else 1
    nbytes = count * np.dtype(dtype).itemsize
    if offset + nbytes > len(view):
        raise ValueError("packed array is truncated")
    array = np.frombuffer(view[offset : offset + nbytes], dtype=dtype).reshape(shape).copy()
    return array, offset + nbytes
