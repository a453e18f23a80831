"""The shared protobuf wire decoder (``curvediag.ingest._protowire``): the per-message and the
bulk decoders agree with each other and with the encoding rules, and damage is a DecodeError."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from test_wandb_log import varint as varint_bytes  # the encoder the W&B tests build logs with

from curvediag.ingest import _protowire as pw

VALUES = [0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1, 2**32, 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("v", VALUES)
def test_varint_round_trip(v: int) -> None:
    raw = varint_bytes(v) + b"\xff"
    value, pos = pw.varint(raw, 0, len(raw))
    assert value == v
    assert pos == len(raw) - 1


def test_signed_reads_negative_int64() -> None:
    raw = varint_bytes(-5)
    assert len(raw) == 10
    value, _ = pw.varint(raw, 0, len(raw))
    assert pw.signed(value) == -5


def test_bulk_varint_matches_per_message_decoder() -> None:
    rng = np.random.default_rng(0)
    values = [int(x) for x in rng.integers(0, 2**62, 200)] + VALUES
    blob = b"".join(varint_bytes(v) for v in values)
    starts, pos = [], 0
    for v in values:
        starts.append(pos)
        pos += len(varint_bytes(v))
    buf = pw.Buf(np.frombuffer(blob, dtype=np.uint8))
    pos_arr = np.array(starts, dtype=np.int64)
    got, lens, ok = buf.varint(pos_arr, np.full(len(values), len(blob), dtype=np.int64))
    assert ok.all()
    assert [int(x) for x in got] == values
    assert [int(n) for n in lens] == [len(varint_bytes(v)) for v in values]
    # a limit inside a varint marks it not ok instead of reading past it
    cut = np.array([starts[-1]], dtype=np.int64)
    _, _, ok2 = buf.varint(cut, cut + 3)
    assert not ok2[0]


def test_fields_splits_a_message() -> None:
    # field 1 varint 150, field 2 string "hi", field 3 double 2.5, field 4 fixed32, group 5
    msg = (
        b"\x08\x96\x01"
        + b"\x12\x02hi"
        + b"\x19"
        + struct.pack("<d", 2.5)
        + b"\x25"
        + struct.pack("<I", 7)
        + b"\x2b\x08\x01\x2c"
    )
    got = pw.fields(msg, 0, len(msg))
    assert [(n, w) for n, w, _, _ in got] == [(1, 0), (2, 2), (3, 1), (4, 5)]
    assert got[0][2] == 150
    assert pw.text(msg, got[1][2], got[1][3]) == "hi"
    a, b = got[2][2], got[2][3]
    assert struct.unpack("<d", msg[a:b])[0] == 2.5
    assert pw.skip_field(msg, 0, len(msg)) == 3


@pytest.mark.parametrize(
    ("msg", "problem"),
    [
        (b"\x08\x96", "truncated varint"),
        (b"\x12\x05hi", "runs past"),
        (b"\x00\x01", "field number 0"),
        (b"\x0f\x01", "invalid wire type"),
        (b"\x2b\x34", "mismatched end-group"),
        (b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
    ],
)
def test_damage_is_a_decode_error(msg: bytes, problem: str) -> None:
    with pytest.raises(pw.DecodeError, match=problem):
        pw.fields(msg, 0, len(msg))


def test_window_rows_are_byte_slices() -> None:
    arr = np.arange(10, dtype=np.uint8)
    w = pw.window(arr, 4)
    assert w.shape == (7, 4)
    assert list(w[3]) == [3, 4, 5, 6]
    assert pw.window(arr[:2], 4).shape == (0, 4)
