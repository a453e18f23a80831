"""The protobuf wire format, decoded by hand: shared by the TensorBoard and W&B readers.

Both binary formats curvediag reads are streams of framed protobuf messages: a TensorBoard event
file holds ``Event`` records, a W&B ``run-*.wandb`` log holds ``Record`` messages. Their framing
differs (see ``_tfevents`` and ``_wandb_log``); the messages inside are decoded with the
primitives here, in two shapes:

- **one message at a time** (:func:`varint`, :func:`fields`, :func:`skip`, ...): plain Python
  over ``bytes``, used for W&B records and TensorBoard's hparams and odd records;
- **in bulk** (:class:`Buf`): numpy gathers over the whole file, one field of every record at
  once, which is how the TensorBoard reader decodes millions of scalar events without a Python
  loop per event.

Errors inside a message raise :class:`DecodeError`; the readers turn it into a warning naming the
file and the byte offset, so it never escapes them.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "EGROUP",
    "FIXED32",
    "FIXED64",
    "LEN",
    "SGROUP",
    "VARINT",
    "Buf",
    "DecodeError",
    "fields",
    "signed",
    "skip",
    "skip_field",
    "text",
    "varint",
    "window",
]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
U32 = npt.NDArray[np.uint32]
F64 = npt.NDArray[np.float64]
B1 = npt.NDArray[np.bool_]

# Wire types (the low three bits of a field's tag)
VARINT: Final = 0
FIXED64: Final = 1
LEN: Final = 2
SGROUP: Final = 3
EGROUP: Final = 4
FIXED32: Final = 5


class DecodeError(Exception):
    """Malformed protobuf data inside one message (the readers catch it)."""


# --------------------------------------------------------------------------------------------
# One message at a time
# --------------------------------------------------------------------------------------------
def varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``pos``; return (value, new position)."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than 10 bytes")


def signed(value: int) -> int:
    """Reinterpret a decoded int32/int64 varint as two's complement."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def skip(buf: bytes, pos: int, end: int, wire_type: int, field_number: int) -> int:
    """Skip one field's value (the tag already read); return the position after it."""
    if wire_type == VARINT:
        _, pos = varint(buf, pos, end)
    elif wire_type == FIXED64:
        pos += 8
    elif wire_type == LEN:
        length, pos = varint(buf, pos, end)
        pos += length
    elif wire_type == FIXED32:
        pos += 4
    elif wire_type == SGROUP:
        while True:
            tag, pos = varint(buf, pos, end)
            if tag & 7 == EGROUP:
                if tag >> 3 != field_number:
                    raise DecodeError("mismatched end-group tag")
                break
            pos = skip(buf, pos, end, tag & 7, tag >> 3)
    else:
        raise DecodeError(f"invalid wire type {wire_type}")
    if pos > end:
        raise DecodeError("field runs past the end of its message")
    return pos


def skip_field(buf: bytes, pos: int, end: int) -> int:
    """Skip one whole field (tag included) starting at ``pos``."""
    tag = buf[pos]
    if tag < 0x80:
        pos += 1
    else:
        tag, pos = varint(buf, pos, end)
    if tag >> 3 == 0:
        raise DecodeError("field number 0")
    return skip(buf, pos, end, tag & 7, tag >> 3)


def fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """Split a message into (field number, wire type, start, end-or-value) tuples.

    For wire type 2 the tuple holds the payload's (start, end); for varints (value, 0); for
    fixed32/64 (start, end) of the raw bytes. Groups are skipped.
    """
    out: list[tuple[int, int, int, int]] = []
    while pos < end:
        tag, pos = varint(buf, pos, end)
        number = tag >> 3
        wire_type = tag & 7
        if number == 0:
            raise DecodeError("field number 0")
        if wire_type == LEN:
            length, pos = varint(buf, pos, end)
            stop = pos + length
            if stop > end:
                raise DecodeError("length-delimited field runs past its message")
            out.append((number, wire_type, pos, stop))
            pos = stop
        elif wire_type == VARINT:
            value, pos = varint(buf, pos, end)
            out.append((number, wire_type, value, 0))
        else:
            start = pos
            pos = skip(buf, pos, end, wire_type, number)
            if wire_type != SGROUP:
                out.append((number, wire_type, start, pos))
    if pos != end:
        raise DecodeError("message runs past its end")
    return out


def text(buf: bytes, start: int, stop: int) -> str:
    """A string field's payload (invalid UTF-8 replaced, never an error)."""
    return buf[start:stop].decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# In bulk, over every record at once
# --------------------------------------------------------------------------------------------
def window(buf: U8, width: int) -> U8:
    """A read-only (n - width + 1, width) view whose row i is buf[i:i+width]."""
    n = buf.shape[0]
    if n < width:
        return np.zeros((0, width), dtype=np.uint8)
    view: U8 = np.lib.stride_tricks.as_strided(
        buf, shape=(n - width + 1, width), strides=(1, 1), writeable=False
    )
    return view


class Buf:
    """A file's bytes plus cached fixed-width windows for unaligned gathers."""

    def __init__(self, arr: U8) -> None:
        self.arr = arr
        self.n = int(arr.shape[0])
        self._win: dict[int, U8] = {}

    def rows(self, pos: I64, width: int) -> U8:
        w = self._win.get(width)
        if w is None:
            w = self._win[width] = window(self.arr, width)
        out: U8 = w[pos]
        return out

    def u8(self, pos: I64) -> U8:
        out: U8 = self.arr[pos]
        return out

    def f64(self, pos: I64) -> F64:
        out: F64 = self.rows(pos, 8).view("<f8").reshape(-1).astype(np.float64, copy=False)
        return out

    def f32(self, pos: I64) -> F64:
        out: F64 = self.rows(pos, 4).view("<f4").reshape(-1).astype(np.float64)
        return out

    def u32(self, pos: I64) -> U32:
        out: U32 = self.rows(pos, 4).view("<u4").reshape(-1).astype(np.uint32, copy=False)
        return out

    def varint(self, pos: I64, limit: I64) -> tuple[U64, I64, B1]:
        """Decode a varint at every ``pos`` (bytes must stay below ``limit``).

        Returns:
            (value, encoded length, ok)
        """
        last = self.n - 1
        ok = pos < limit
        b = self.arr[np.minimum(pos, last)]
        val = b.astype(np.uint64)
        more = b >= 0x80
        ln = np.ones(pos.shape[0], dtype=np.int64)
        if not more.any():  # the common case: one-byte varints
            return val, ln, ok
        todo = np.flatnonzero(more)
        val[todo] &= np.uint64(0x7F)
        for i in range(1, 10):
            p = pos[todo] + i
            inside = p < limit[todo]
            if not inside.all():
                ok[todo[~inside]] = False
                todo = todo[inside]
                p = p[inside]
            b = self.arr[np.minimum(p, last)]
            val[todo] |= (b & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * i)
            ln[todo] += 1
            todo = todo[b >= 0x80]
            if todo.size == 0:
                break
        if todo.size:
            ok[todo] = False
        return val, ln, ok
