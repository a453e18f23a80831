"""Tests of the dependency-free W&B ``run-*.wandb`` reader (curvediag.ingest._wandb_log).

Files are built with a small writer below (LevelDB-log framing + a hand-written protobuf
encoder for the few Record fields involved), so the tests need neither ``wandb`` nor
``protobuf``. The real files in ``../shared/corpus/wbb_*`` are checked against MANIFEST.tsv
when the corpus is present, and against wandb's own protobuf classes when ``wandb`` is
importable (never in CI).
"""

from __future__ import annotations

import csv
import json
import math
import re
import struct
import warnings
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curvediag.errors import CurvediagWarning, MalformedRunError
from curvediag.ingest._wandb_log import WandbLog, read_wandb_log

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# --------------------------------------------------------------------------------------------
# A minimal writer: protobuf encoding of the few fields involved + W&B's block framing
# --------------------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int32/int64 are written as 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def f_len(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return tag(number, 2) + varint(len(data)) + data


def f_varint(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def item(
    key: str | None = None, nested: Sequence[str] = (), value_json: str | None = None
) -> bytes:
    """A HistoryItem / ConfigItem / SummaryItem (key=1, nested_key=2, value_json=16)."""
    out = b""
    if key is not None:
        out += f_len(1, key)
    for part in nested:
        out += f_len(2, part)
    if value_json is not None:
        out += f_len(16, value_json)
    return out


def jv(value: object) -> str:
    """value_json as wandb writes it (bare NaN/Infinity allowed)."""
    return json.dumps(value)


def history(items: Iterable[bytes], step: int | None = None) -> bytes:
    """A Record with a HistoryRecord (Record.history=2; item=1, step=2{num=1})."""
    body = b"".join(f_len(1, it) for it in items)
    if step is not None:
        body += f_len(2, f_varint(1, step) if step else b"")
    return record(2, body)


def row(values: dict[str, object], step: int | None = None, nested: bool = False) -> bytes:
    """A history Record from a dict, using key= (old core) or nested_key= (Go core)."""
    if nested:
        items = [item(nested=[k], value_json=jv(v)) for k, v in values.items()]
    else:
        items = [item(key=k, value_json=jv(v)) for k, v in values.items()]
    return history(items, step)


def config(updates: Iterable[bytes] = (), removes: Iterable[bytes] = ()) -> bytes:
    """A Record with a ConfigRecord (Record.config=5; update=1, remove=2)."""
    body = b"".join(f_len(1, u) for u in updates) + b"".join(f_len(2, r) for r in removes)
    return record(5, body)


def summary(updates: Iterable[bytes] = (), removes: Iterable[bytes] = ()) -> bytes:
    """A Record with a SummaryRecord (Record.summary=3; update=1, remove=2)."""
    body = b"".join(f_len(1, u) for u in updates) + b"".join(f_len(2, r) for r in removes)
    return record(3, body)


def run_record(
    run_id: str = "abc123",
    project: str = "proj",
    display_name: str = "my-run",
    start_time: tuple[int, int] = (1700000000, 500000000),
    config_items: Iterable[bytes] = (),
    tags: Sequence[str] = (),
) -> bytes:
    """A Record with a RunRecord (Record.run=17)."""
    body = f_len(1, run_id) + f_len(3, project)
    cfg = b"".join(f_len(1, c) for c in config_items)
    if cfg:
        body += f_len(4, cfg)
    body += f_len(8, display_name)
    for t in tags:
        body += f_len(10, t)
    body += f_len(17, f_varint(1, start_time[0]) + f_varint(2, start_time[1]))
    return record(17, body)


def exit_record(code: int, runtime: int = 12) -> bytes:
    body = (f_varint(1, code) if code else b"") + f_varint(2, runtime)
    return record(18, body)


def record(oneof_field: int, body: bytes, num: int = 1) -> bytes:
    """A Record: num=1, the oneof member, plus a control (16) and _info (200) like wandb."""
    return (
        f_varint(1, num)
        + f_len(oneof_field, body)
        + f_len(16, f_len(4, "mailbox"))
        + f_len(200, f_len(1, "streamid"))
    )


def frame(payloads: Iterable[bytes], pad_last_block: bool = False) -> bytes:
    """W&B's framing (as wandb/sdk/internal/datastore.py writes it)."""
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))

    def put(data: bytes, rtype: int) -> None:
        crc = zlib.crc32(bytes([rtype]) + data) & 0xFFFFFFFF
        out.extend(struct.pack("<IHB", crc, len(data), rtype) + data)

    for data in payloads:
        space = BLOCK - len(out) % BLOCK
        if space < 7:
            out.extend(b"\x00" * space)
            space = BLOCK
        if len(data) + 7 <= space:
            put(data, FULL)
            continue
        room = space - 7
        put(data[:room], FIRST)
        used = room
        while len(data) - used > BLOCK - 7:
            put(data[used : used + BLOCK - 7], MIDDLE)
            used += BLOCK - 7
        put(data[used:], LAST)
    if pad_last_block:
        out.extend(b"\x00" * (BLOCK - len(out) % BLOCK))
    return bytes(out)


def records_at(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(offset, length, type) of every physical record in a well-formed file."""
    pos = 7
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, rtype = struct.unpack_from("<IHB", data, pos)
        if rtype == 0:
            return
        yield pos, length, rtype
        pos += 7 + length


def write(tmp_path: Path, data: bytes, name: str = "run-test.wandb") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def num(value: object) -> float:
    assert isinstance(value, (int, float)), value
    return value


def read_quiet(path: Path, **kw: bool) -> WandbLog:
    """Read without emitting CurvediagWarning (pyproject turns warnings into errors)."""
    return read_wandb_log(path, warn=False, **kw)


def simple_run(n: int = 50, nested: bool = False) -> list[bytes]:
    recs = [run_record(), config([item("learning_rate", value_json="0.001")])]
    for i in range(n):
        recs.append(
            row(
                {"train/loss": 2.0 / (i + 1), "train/global_step": i + 1, "_step": i},
                step=i,
                nested=nested,
            )
        )
    recs.append(summary([item("train/loss", value_json=jv(2.0 / n))]))
    return recs


# --------------------------------------------------------------------------------------------
# Basic decoding
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nested", [False, True])
def test_simple_run(tmp_path: Path, nested: bool) -> None:
    log = read_quiet(write(tmp_path, frame(simple_run(50, nested))))
    assert log.warnings == []
    assert len(log.history) == 50
    assert log.history[0] == {"train/loss": 2.0, "train/global_step": 1, "_step": 0}
    assert log.history[-1]["train/loss"] == pytest.approx(2.0 / 50)
    assert log.config == {"learning_rate": 0.001}
    assert log.summary == {"train/loss": pytest.approx(0.04)}
    assert log.run["run_id"] == "abc123"
    assert log.run["project"] == "proj"
    assert log.run["display_name"] == "my-run"
    assert log.run["start_time"] == pytest.approx(1700000000.5)
    assert "exit_code" not in log.run
    assert log.path.endswith("run-test.wandb")


def test_accepts_str_path_and_types(tmp_path: Path) -> None:
    recs = [
        row(
            {
                "i": 3,
                "neg": -7,
                "f": 1.5,
                "e": 1e-8,
                "big": 123456789012345678901234567890,
                "s": "text",
                "t": True,
                "n": None,
                "lst": [1, 2.5],
            }
        )
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    got = log.history[0]
    assert got == {
        "i": 3,
        "neg": -7,
        "f": 1.5,
        "e": 1e-8,
        "big": 123456789012345678901234567890,
        "s": "text",
        "t": True,
        "n": None,
        "lst": [1, 2.5],
    }
    assert type(got["i"]) is int and type(got["neg"]) is int and type(got["f"]) is float
    assert read_wandb_log(str(tmp_path / "run-test.wandb")).history == log.history


def test_nan_and_infinity(tmp_path: Path) -> None:
    recs = [
        history(
            [
                item("a", value_json="NaN"),
                item("b", value_json="Infinity"),
                item("c", value_json="-Infinity"),
                item("d", value_json="[NaN, Infinity, 1]"),
                item("e", value_json='{"x": -Infinity}'),
            ]
        )
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    got = log.history[0]
    assert math.isnan(num(got["a"]))
    assert got["b"] == math.inf
    assert got["c"] == -math.inf
    d = got["d"]
    assert isinstance(d, list) and math.isnan(d[0]) and d[1:] == [math.inf, 1]
    assert got["e/x"] == -math.inf  # non-media dicts are flattened with '/'


def test_step_field_fills_missing_step(tmp_path: Path) -> None:
    recs = [
        history([item("loss", value_json="1.0")], step=0),  # step {} (num omitted)
        history([item("loss", value_json="0.5")], step=7),
        history([item("loss", value_json="0.4"), item("_step", value_json="99")], step=8),
        history([item("loss", value_json="0.3")]),  # no step at all
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert [r.get("_step") for r in log.history] == [0, 7, 99, None]


def test_nested_keys_media_and_dicts(tmp_path: Path) -> None:
    recs = [
        history(
            [
                # Go core: one nested_key part holding a '/'
                item(nested=["Task/train_loss"], value_json="2.5"),
                # Go core: a nested metric dict split into parts
                item(nested=["nested", "b", "c"], value_json="4"),
                item(nested=["nested", "a"], value_json="2"),
                # Go core: a media value split into one item per field
                item(nested=["Task/fig", "_type"], value_json='"image-file"'),
                item(nested=["Task/fig", "size"], value_json="1234"),
                item(nested=["Task/fig", "width"], value_json="10"),
                item(nested=["Task/fig", "meta", "x"], value_json="1"),
                # old Python core: media and plain dicts as one JSON value
                item("img", value_json='{"_type": "image-file", "size": 5, "path": "p.png"}'),
                item("grp", value_json='{"a": 1, "b": {"c": 2}}'),
            ],
            step=3,
        )
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert log.history == [
        {
            "Task/train_loss": 2.5,
            "nested/b/c": 4,
            "nested/a": 2,
            "Task/fig": {"_type": "image-file", "size": 1234, "width": 10, "meta": {"x": 1}},
            "img": {"_type": "image-file", "size": 5, "path": "p.png"},
            "grp/a": 1,
            "grp/b/c": 2,
            "_step": 3,
        }
    ]


def test_config_value_nesting_updates_and_removes(tmp_path: Path) -> None:
    recs = [
        run_record(config_items=[item("_wandb", value_json="{}"), item("lr", value_json="0.1")]),
        config(
            [
                item("lr", value_json='{"value": 0.01, "desc": null}'),
                item("epochs", value_json='{"value": 3}'),
                item("model", value_json='{"n_layer": 2, "value": 1, "extra": true}'),
                item(nested=["opt", "name"], value_json='"adam"'),
                item(nested=["opt", "betas"], value_json="[0.9, 0.99]"),
                item("gone", value_json="1"),
                item("note", value_json='"x"'),
            ]
        ),
        config([item("epochs", value_json="5")], removes=[item("gone")]),
        config(removes=[item(nested=["opt", "betas"])]),
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert log.config == {
        "_wandb": {},
        "lr": 0.01,
        "epochs": 5,
        "model": {"n_layer": 2, "value": 1, "extra": True},
        "opt": {"name": "adam"},
        "note": "x",
    }


def test_summary_last_wins_and_remove(tmp_path: Path) -> None:
    recs = [
        summary([item("loss", value_json="3.0"), item("acc", value_json="0.1")]),
        summary(
            [
                item(nested=["loss"], value_json="2.0"),
                item(nested=["_wandb", "runtime"], value_json="5"),
            ]
        ),
        summary(
            [
                item(nested=["tbl", "_type"], value_json='"table-file"'),
                item(nested=["tbl", "nrows"], value_json="3"),
            ]
        ),
        summary([item("old", value_json="1"), item("best", value_json="NaN")]),
        summary(removes=[item("old"), item("acc")]),
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert log.summary.keys() == {"loss", "_wandb/runtime", "tbl", "best"}
    assert log.summary["loss"] == 2.0
    assert log.summary["tbl"] == {"_type": "table-file", "nrows": 3}
    assert math.isnan(num(log.summary["best"]))


def test_run_metadata_and_exit(tmp_path: Path) -> None:
    header = record(21, f_len(1, f_len(1, "0.31.0+abc") + f_len(2, "0.70.0")))
    recs = [header, run_record(tags=["a", "b"]), exit_record(255, 71), record(20, b"")]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert log.run["wandb_version"] == "0.31.0+abc"
    assert log.run["tags"] == ["a", "b"]
    assert log.run["exit_code"] == 255
    assert log.run["exit_runtime"] == 71
    assert log.run["finished"] is True
    log = read_quiet(write(tmp_path, frame([exit_record(0)])))
    assert log.run == {"exit_code": 0, "exit_runtime": 12}
    log = read_quiet(write(tmp_path, frame([exit_record(-1)])))  # int32 -1: 10-byte varint
    assert log.run["exit_code"] == -1


def test_long_keys_values_and_unknown_fields(tmp_path: Path) -> None:
    long_key = "k" * 300
    long_val = json.dumps("v" * 500)
    unknown = (
        f_varint(50, 7)  # unknown varint
        + tag(51, 1) + b"\x00" * 8  # fixed64
        + tag(52, 5) + b"\x00" * 4  # fixed32
        + tag(53, 3) + f_varint(1, 1) + tag(54, 3) + tag(54, 4) + tag(53, 4)  # nested groups
        + f_len(55, b"junk")
    )  # fmt: skip
    it1 = item(long_key, value_json="1.25") + unknown
    it2 = unknown + item("x", value_json=long_val)
    # legacy typed HistoryItem fields: none=3, boolean=4, integer=5 (sint64), number=6, text=7
    legacy = [
        item("n") + f_varint(3, 1),
        item("b") + f_varint(4, 1),
        item("i") + f_varint(5, 2 * 21 + 1),  # zigzag(-22)
        item("d") + tag(6, 1) + struct.pack("<d", 0.75),
        item("t") + f_len(7, "hello"),
        item("j") + f_len(8, "[1, 2]"),
    ]
    body = b"".join(f_len(1, it) for it in [it1, it2, *legacy]) + unknown
    rec = f_varint(1, 1) + unknown + f_len(2, body) + unknown
    log = read_quiet(write(tmp_path, frame([rec])))
    assert log.warnings == []
    assert log.history == [
        {
            long_key: 1.25,
            "x": "v" * 500,
            "n": None,
            "b": True,
            "i": -22,
            "d": 0.75,
            "t": "hello",
            "j": [1, 2],
        }
    ]


def sized_row(size: int, step: int) -> bytes:
    """A history Record of exactly ``size`` bytes."""
    for n in range(size, -1, -1):
        rec = row({"pad": "p" * n}, step=step)
        if len(rec) == size:
            return rec
    raise AssertionError(size)


@pytest.mark.parametrize("tail", [3, 6, 7, 8])
def test_multi_block_records(tmp_path: Path, tail: int) -> None:
    """FIRST/MIDDLE/LAST spanning blocks; block tails < 7 bytes; a 0-byte FIRST fragment."""
    big = "x" * 80_000  # > 2 blocks: FIRST + MIDDLE + LAST
    recs = [sized_row(BLOCK - 7 - 7 - tail, 0), row({"loss": 1.0, "blob": big}, step=1)]
    recs += [row({"loss": 1.0 / (i + 2), "pad": "p" * (i % 37)}, step=i + 2) for i in range(3000)]
    recs.append(config([item("cfg", value_json=json.dumps({"blob": big}))]))
    data = frame(recs)
    layout = list(records_at(data))
    assert {FULL, FIRST, MIDDLE, LAST} <= {rtype for _o, _l, rtype in layout}
    if tail < 7:
        assert layout[1][0] == BLOCK  # the tail was skipped as padding
    elif tail == 7:
        assert layout[1][1:] == (0, FIRST)  # an empty FIRST fragment fills the block
    log = read_quiet(write(tmp_path, data))
    assert log.warnings == []
    assert len(log.history) == 3002
    assert log.history[1]["blob"] == big
    assert [r["_step"] for r in log.history] == list(range(3002))
    assert log.config == {"cfg": {"blob": big}}


def test_padded_to_block_end_is_clean(tmp_path: Path) -> None:
    """A zero-filled block tail of >= 7 bytes after the last record (preallocation)."""
    log = read_quiet(write(tmp_path, frame(simple_run(5), pad_last_block=True)))
    assert len(log.history) == 5
    assert len(log.warnings) == 1 and "zero bytes" in log.warnings[0]


# --------------------------------------------------------------------------------------------
# Damaged files
# --------------------------------------------------------------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(MalformedRunError, match="empty"):
        read_wandb_log(write(tmp_path, b""))


@pytest.mark.parametrize(
    "head",
    [b"\x00" * 7, b"PK\x03\x04xyz", b":W&", b":W&B\xe1\xbf\x00", b":W&B\xe1\xbe\x01", b'{"a": 1}'],
)
def test_wrong_header(tmp_path: Path, head: bytes) -> None:
    with pytest.raises(MalformedRunError) as err:
        read_wandb_log(write(tmp_path, head + frame(simple_run(3))[7:]))
    assert "run-test.wandb" in str(err.value)


def test_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(MalformedRunError, match="cannot read"):
        read_wandb_log(tmp_path)  # a directory
    with pytest.raises(MalformedRunError, match="cannot read"):
        read_wandb_log(tmp_path / "missing.wandb")


def test_header_only(tmp_path: Path) -> None:
    log = read_quiet(write(tmp_path, frame([])))
    assert (log.history, log.config, log.summary, log.run, log.warnings) == ([], {}, {}, {}, [])


def test_truncated_last_record(tmp_path: Path) -> None:
    data = frame(simple_run(40))
    last_off = list(records_at(data))[-1][0]
    path = tmp_path / "run-test.wandb"
    for cut in (last_off + 3, last_off + 7, last_off + 9, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.warns(CurvediagWarning, match=r"offset \d+"):
            log = read_wandb_log(path)
        assert len(log.history) == 40  # the cut record is the summary
        assert log.summary == {}
        assert len(log.warnings) == 1
        assert str(path) in log.warnings[0] and f"offset {last_off}" in log.warnings[0]
        assert "truncated" in log.warnings[0] or "ends inside" in log.warnings[0]
        assert read_quiet(path, check_crc=False).warnings == log.warnings


def test_truncated_inside_fragmented_record(tmp_path: Path) -> None:
    recs = [*simple_run(5), row({"blob": "x" * 70_000}), row({"after": 1})]
    data = frame(recs)
    first = next(o for o, _l, t in records_at(data) if t == FIRST)
    log = read_quiet(write(tmp_path, data[: first + 40_000]))
    assert len(log.history) == 5
    assert any(f"offset {first}" in w and "fragmented" in w for w in log.warnings)


def test_crc_mismatch_recovers_at_next_block(tmp_path: Path) -> None:
    recs = [row({"loss": float(i), "pad": "p" * 200}, step=i) for i in range(400)]
    data = bytearray(frame(recs))
    offsets = list(records_at(bytes(data)))
    bad_off, bad_len, _ = offsets[10]
    data[bad_off + 7 + bad_len // 2] ^= 0xFF  # corrupt one payload byte
    log = read_quiet(write(tmp_path, bytes(data)))
    steps = [r["_step"] for r in log.history]
    assert steps[:10] == list(range(10))
    assert 10 not in steps
    # everything from the first record fully inside block 1 on is back
    resumed = next(i for i, (o, _l, _t) in enumerate(offsets) if o >= BLOCK)
    assert steps[-1] == 399 and resumed in steps
    assert any("CRC mismatch" in w and f"offset {bad_off}" in w for w in log.warnings)
    # check_crc=False reads the damaged record (payload bytes are a string's content)
    assert len(read_quiet(tmp_path / "run-test.wandb", check_crc=False).history) == 400


def test_bad_record_type_and_garbage_block(tmp_path: Path) -> None:
    recs = [row({"loss": float(i), "pad": "p" * 300}, step=i) for i in range(300)]
    data = bytearray(frame(recs))
    # (start, end) of each logical record = each step
    spans, start = [], 0
    for o, ln, t in records_at(bytes(data)):
        if t in (FULL, FIRST):
            start = o
        if t in (FULL, LAST):
            spans.append((start, o + 7 + ln))
    assert len(spans) == 300
    data[spans[5][0] + 6] = 9  # record type 9
    data[2 * BLOCK : 3 * BLOCK] = bytes((i * 7 + 3) % 256 for i in range(BLOCK))  # garbage
    log = read_quiet(write(tmp_path, bytes(data)))
    steps = [r["_step"] for r in log.history]
    # lost: step 5 and the rest of block 0; anything touching block 2
    lost = {i for i, (a, _b) in enumerate(spans) if i >= 5 and a < BLOCK}
    lost |= {i for i, (a, b) in enumerate(spans) if b > 2 * BLOCK and a < 3 * BLOCK}
    assert steps == [i for i in range(300) if i not in lost]
    assert any("bad record type 9" in w for w in log.warnings)
    assert len(log.warnings) <= 4


def test_undecodable_payload_with_valid_crc(tmp_path: Path) -> None:
    recs = [
        row({"a": 1}),
        b"\x12\xff\xff\xff\x0f",  # history field claiming 4 GiB
        b"\x0b\x14",  # group start with a mismatched end tag
        history([item("bad", value_json="{not json")]),
        row({"a": 2}),
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert [r["a"] for r in log.history] == [1, 2]
    assert len(log.warnings) == 3
    assert any("not JSON" in w for w in log.warnings)


def test_trailing_zeros_after_crash(tmp_path: Path) -> None:
    data = frame(simple_run(10)) + b"\x00" * 5000
    log = read_quiet(write(tmp_path, data))
    assert len(log.history) == 10
    assert len(log.warnings) == 1 and "zero bytes" in log.warnings[0]


def test_warnings_are_capped(tmp_path: Path) -> None:
    recs = [history([item("bad", value_json="{")]) for _ in range(200)]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert len(log.warnings) == 51
    assert "150 further" in log.warnings[-1]


def test_warn_flag_emits_curvediag_warning(tmp_path: Path) -> None:
    path = write(tmp_path, frame(simple_run(3))[:-3])
    with pytest.warns(CurvediagWarning):
        read_wandb_log(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_wandb_log(path, warn=False).warnings


# --------------------------------------------------------------------------------------------
# Property tests: only MalformedRunError or warnings, never another exception
# --------------------------------------------------------------------------------------------

_VALID = frame(
    [
        run_record(tags=["t"], config_items=[item("lr", value_json="0.1")]),
        *(
            history(
                [
                    item("train/loss", value_json=jv(1.0 / (i + 1))),
                    item(nested=["m", "_type"], value_json='"image-file"'),
                    item(nested=["m", "size"], value_json="3"),
                    item("v", value_json="[NaN, 1]"),
                ],
                step=i,
            )
            for i in range(30)
        ),
        row({"blob": "z" * 40_000}),
        summary([item("train/loss", value_json="0.5")]),
        exit_record(1),
    ]
)


def _read_any(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "run-prop.wandb"
    path.write_bytes(data)
    for check_crc in (True, False):
        try:
            log = read_wandb_log(path, check_crc=check_crc, warn=False)
        except MalformedRunError:
            continue
        assert isinstance(log.history, list) and isinstance(log.warnings, list)
        assert all(isinstance(w, str) and str(path) in w for w in log.warnings)


_settings = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_settings
@given(st.binary(max_size=2000))
def test_random_bytes(tmp_path: Path, data: bytes) -> None:
    _read_any(tmp_path, data)
    _read_any(tmp_path, _VALID[:7] + data)


@_settings
@given(st.integers(0, len(_VALID)))
def test_random_truncation(tmp_path: Path, cut: int) -> None:
    _read_any(tmp_path, _VALID[:cut])


@_settings
@given(
    st.lists(
        st.tuples(st.integers(7, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8
    )
)
def test_random_corruption(tmp_path: Path, edits: list[tuple[int, int]]) -> None:
    data = bytearray(_VALID)
    for pos, value in edits:
        data[pos] = value
    _read_any(tmp_path, bytes(data))


@_settings
@given(st.binary(max_size=300), st.integers(1, 4))
def test_random_payload_with_valid_framing(tmp_path: Path, payload: bytes, oneof: int) -> None:
    """Garbage protobuf inside correctly framed (CRC-valid) records."""
    field = (2, 3, 5, 17)[oneof - 1]
    _read_any(tmp_path, frame([payload, f_len(field, payload), record(field, payload)]))


# --------------------------------------------------------------------------------------------
# Real files from the corpus
# --------------------------------------------------------------------------------------------

_NUM = r"(-?[\d.]+(?:e[+-]?\d+)?)"
_CURVE = re.compile(
    r"(train loss|eval) \(([^,]+), (\d+) pts\) "
    + _NUM
    + "->min "
    + _NUM
    + r" \(step \d+\)->last "
    + _NUM
)


def _manifest_rows() -> list[tuple[str, Path, list[tuple[str, int, float, float, float]]]]:
    manifest = CORPUS / "MANIFEST.tsv"
    if not manifest.is_file():
        return []
    out = []
    with manifest.open(newline="") as fh:
        for rec in csv.reader(fh, delimiter="\t"):
            if not rec or not rec[0].startswith("wbb_"):
                continue
            curves = [
                (m[2], int(m[3]), float(m[4]), float(m[5]), float(m[6]))
                for m in _CURVE.finditer(rec[-1])
            ]
            files = sorted((CORPUS / rec[0]).glob("*.wandb"))
            if files:
                out.append((rec[0], files[0], curves))
    return out


_CORPUS_ROWS = _manifest_rows()


def _sig3(x: float) -> str:
    return f"{x:.3g}"


@pytest.mark.corpus
@pytest.mark.skipif(not _CORPUS_ROWS, reason="corpus not present")
@pytest.mark.parametrize("name,path,curves", _CORPUS_ROWS, ids=[r[0] for r in _CORPUS_ROWS])
def test_corpus_file_matches_manifest(
    name: str, path: Path, curves: list[tuple[str, int, float, float, float]]
) -> None:
    log = read_wandb_log(path)
    assert log.warnings == []
    assert log.history and log.run.get("run_id") and log.config
    assert curves, f"{name}: no curve numbers parsed from MANIFEST.tsv"
    for key, count, first, low, last in curves:
        values = [v for r in log.history if isinstance(v := r.get(key), (int, float))]
        assert len(values) == count, key
        assert _sig3(values[0]) == _sig3(first)
        assert _sig3(min(values)) == _sig3(low)
        assert _sig3(values[-1]) == _sig3(last)
    steps = [num(r["_step"]) for r in log.history]
    assert steps == sorted(steps)


_EXPECTED: dict[str, tuple[int, str, str, int, dict[str, object], set[str]]] = {
    # name: (rows, run_id, project, exit_code, some config keys, some history keys)
    "wbb_alpaca": (
        1219, "v7i3k2p0", "huggingface", 0,
        {"learning_rate": 2e-05, "lr_scheduler_type": "cosine", "num_train_epochs": 3.0},
        {"train/loss", "train/learning_rate", "train/epoch", "train/global_step", "_runtime"},
    ),
    "wbb_loss_plateau": (
        41, "79u2qtit", "loss_plateau_tf", 255,
        {"train": {"lr": 0.0001}},
        {"train_loss", "MovingWindowQuotient/train_loss", "MovingWindowQuotient/cosine_sim_fig"},
    ),
    "wbb_nanogpt_druid": (
        13, "jqe8zy9r", "owt", 255,
        {"learning_rate": 0.0006, "batch_size": 12},
        {"iter", "train/loss", "val/loss", "lr", "mfu"},
    ),
    "wbb_tinylm": (
        2145, "kj3gdsjx", "TinyLM", 0,
        {"lr": 0.0005, "warmup_steps": 2000},
        {"train/loss", "train/lr", "train/update_step", "val/loss", "val/ppl"},
    ),
}  # fmt: skip


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(_EXPECTED))
def test_corpus_file_details(name: str) -> None:
    files = sorted((CORPUS / name).glob("*.wandb"))
    if not files:
        pytest.skip("corpus not present")
    rows, run_id, project, exit_code, cfg, keys = _EXPECTED[name]
    log = read_wandb_log(files[0])
    assert len(log.history) == rows
    assert (log.run["run_id"], log.run["project"], log.run["exit_code"]) == (
        run_id,
        project,
        exit_code,
    )
    for k, v in cfg.items():
        if isinstance(v, dict):
            got = log.config[k]
            assert isinstance(got, dict) and v.items() <= got.items()
        else:
            assert log.config[k] == v
    assert keys <= set().union(*log.history)
    for r in log.history:  # media are whole dicts, never split into numeric-looking keys
        assert not any(k.endswith(("/_type", "/size", "/width", "/sha256")) for k in r)
    assert {"_step", "_runtime", "_timestamp"} <= set(log.summary)


# --------------------------------------------------------------------------------------------
# Cross-check against wandb's own protobuf classes (skipped unless wandb is installed)
# --------------------------------------------------------------------------------------------


def _wandb_files() -> list[Path]:
    files = sorted(CORPUS.glob("wbb_*/*.wandb")) if CORPUS.is_dir() else []
    files += sorted(FIXTURES.glob("hf/*/wandb/offline-run-*/run-*.wandb"))
    return files


def _pb_records(path: Path) -> Iterator[bytes]:
    """Independent framing reader for the cross-check."""
    data = path.read_bytes()
    pos, parts = 7, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:
            pos += BLOCK - pos % BLOCK
            continue
        _crc, length, rtype = struct.unpack_from("<IHB", data, pos)
        payload = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if rtype == FULL:
            yield payload
        elif rtype == FIRST:
            parts = payload
        elif rtype == MIDDLE:
            parts += payload
        elif rtype == LAST:
            yield parts + payload
        else:
            return


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@pytest.mark.corpus
@pytest.mark.parametrize("path", _wandb_files(), ids=lambda p: p.parent.name)
def test_cross_check_with_wandb_protobuf(path: Path) -> None:
    pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
    expected_rows: list[dict[str, object]] = []
    expected_summary: dict[str, object] = {}
    expected_config: dict[str, object] = {}
    for payload in _pb_records(path):
        rec = pb.Record.FromString(payload)
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            got: dict[str, object] = {}
            for it in rec.history.item:
                if len(it.nested_key) <= 1:
                    v = json.loads(it.value_json)
                    if not isinstance(v, dict):
                        got[it.key or "/".join(it.nested_key)] = v
            if "_step" not in got and rec.history.HasField("step"):
                got["_step"] = rec.history.step.num
            expected_rows.append(got)
        elif kind == "summary":
            for it in rec.summary.update:
                if len(it.nested_key) <= 1:
                    expected_summary[it.key or it.nested_key[0]] = json.loads(it.value_json)
        elif kind in ("config", "run"):
            cfg = rec.config if kind == "config" else rec.run.config
            for it in cfg.update:
                if not it.nested_key:
                    expected_config[it.key] = json.loads(it.value_json)
    log = read_wandb_log(path)
    assert len(log.history) == len(expected_rows)
    for mine, theirs in zip(log.history, expected_rows, strict=True):
        for k, v in theirs.items():
            assert _same(mine[k], v), (k, mine[k], v)
    for k, v in expected_summary.items():
        if not isinstance(v, dict):
            assert _same(log.summary[k], v), k
    for k, v in expected_config.items():
        assert log.config[k] == v, k


def test_writer_matches_wandb_protobuf() -> None:
    """The test writer's encoding parses with wandb's classes (when installed)."""
    pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
    rec = pb.Record.FromString(
        history([item("a", value_json="1.5"), item(nested=["b", "c"], value_json="NaN")], step=4)
    )
    assert rec.history.item[0].key == "a" and rec.history.item[0].value_json == "1.5"
    assert list(rec.history.item[1].nested_key) == ["b", "c"]
    assert rec.history.step.num == 4
    rec = pb.Record.FromString(run_record(tags=["x"]))
    assert (rec.run.run_id, rec.run.display_name, list(rec.run.tags)) == ("abc123", "my-run", ["x"])
    assert rec.run.start_time.seconds == 1700000000
    rec = pb.Record.FromString(exit_record(-1))
    assert rec.exit.exit_code == -1
    rec = pb.Record.FromString(config([item("k", value_json="1")], removes=[item("r")]))
    assert rec.config.update[0].key == "k" and rec.config.remove[0].key == "r"


def test_deeply_nested_json(tmp_path: Path) -> None:
    deep = '{"a":' * 900 + "1" + "}" * 900
    recs = [
        summary([item("s", value_json=deep)]),
        history([item("h", value_json=deep), item("ok", value_json="1")]),
        history([item("bad", value_json="[" * 100_000), item("ok", value_json="2")]),
    ]
    log = read_quiet(write(tmp_path, frame(recs)))
    assert [r["ok"] for r in log.history] == [1, 2]
    assert len(log.summary) == 1
    assert len(log.warnings) == 1 and "not JSON" in log.warnings[0]


def test_a_loop_step_counter_logged_on_every_row_is_the_step() -> None:
    from curvediag.ingest.wandb_run import history_to_run

    rows: list[dict[str, object]] = [
        {"_step": i, "iter": 200 * i, "train/loss": 3.0 - 0.1 * i} for i in range(6)
    ]
    run = history_to_run(rows, source="x", name="x", fmt="wandb-run")
    loss = run.get("train/loss")
    assert loss is not None and [int(s) for s in loss.steps] == [0, 200, 400, 600, 800, 1000]
    # a counter missing from some rows, or going backwards, is not a step axis
    rows[3].pop("iter")
    run = history_to_run(rows, source="x", name="x", fmt="wandb-run")
    loss = run.get("train/loss")
    assert loss is not None and [int(s) for s in loss.steps] == [0, 1, 2, 3, 4, 5]
    back: list[dict[str, object]] = [
        {"_step": i, "iter": [0, 5, 3, 9][i], "train/loss": 1.0} for i in range(4)
    ]
    loss = history_to_run(back, source="x", name="x", fmt="wandb-run").get("train/loss")
    assert loss is not None and [int(s) for s in loss.steps] == [0, 1, 2, 3]


def test_a_lone_train_loss_is_a_point_and_the_trainer_end_row_is_a_summary() -> None:
    """A plain loop that logged one epoch (``train_loss`` once, beside its other metrics) keeps
    that point; the Trainer's end-of-run row (``train_loss`` beside ``train_runtime``,
    ``total_flos``...) goes to the summary, not into the loss curve."""
    from curvediag.ingest.wandb_run import history_to_run

    one_epoch: list[dict[str, object]] = [
        {"_step": 0, "epoch": 1, "train_loss": 3.26, "train_acc": 31.2, "val_loss": 2.03}
    ]
    run = history_to_run(one_epoch, source="x", name="x", fmt="wandb-run")
    loss = run.get("train/loss")
    assert loss is not None and list(loss.values) == [3.26]
    hf: list[dict[str, object]] = [
        {"_step": i, "train/global_step": 10 * i, "train/loss": 2.0 - 0.1 * i} for i in range(1, 6)
    ] + [
        {
            "_step": 6,
            "train/global_step": 50,
            "train/train_loss": 1.75,
            "train/train_runtime": 12.0,
            "train/total_flos": 1e12,
        }
    ]
    run = history_to_run(hf, source="x", name="x", fmt="wandb-run")
    loss = run.get("train/loss")
    assert loss is not None and len(loss) == 5 and 1.75 not in list(loss.values)
    assert run.meta.summary["train_loss"] == 1.75


def test_lightning_step_and_epoch_pairs_in_a_wandb_history() -> None:
    """WandbLogger gets the same ``<name>_step`` / ``<name>_epoch`` pairs as the CSV logger."""
    from curvediag.ingest.wandb_run import history_to_run

    rows: list[dict[str, object]] = []
    for step in range(1, 41):
        rows.append({"_step": step, "trainer/global_step": step, "train_loss_step": 1.0 / step})
        if step % 20 == 0:
            rows.append(
                {
                    "_step": step,
                    "trainer/global_step": step,
                    "train_loss_epoch": 3.0 / step,
                    "val_loss_epoch": 2.0 / step,
                    "val_loss_step": 9.0,
                }
            )
    run = history_to_run(rows, source="x", name="x", fmt="wandb-run")
    assert run.metrics["train/loss"].values.size == 40
    assert run.metrics["train/loss_epoch"].steps.tolist() == [20, 40]
    assert run.metrics["eval/loss"].values.tolist() == pytest.approx([0.1, 0.05])


def test_a_pre_2020_run_folder_keeps_its_files_beside_the_history() -> None:
    """W&B before 0.9 wrote ``run-*/wandb-history.jsonl``, ``config.yaml`` and
    ``wandb-summary.json`` straight into the run folder, without ``files/`` (real runs:
    benchmarks/real_runs/wbh_tictactoe_mlp_stuck_ln10 and wbh_mnist_logreg_unnormalized,
    which read as "no training log found here")."""
    import curvediag

    root = Path(__file__).resolve().parents[1] / "benchmarks" / "real_runs"
    run = curvediag.load_run(root / "wbh_tictactoe_mlp_stuck_ln10")
    loss = run.get("train/loss")
    assert loss is not None and loss.values.size == 215
    assert float(loss.values[0]) == pytest.approx(2.3025851, abs=1e-6)  # ln 10 at every step
    # ln 10 without a named class count is chance level (which explains "not decreasing")
    assert "loss-at-chance-level" in curvediag.diagnose(run).finding_ids
    other = curvediag.load_run(root / "wbh_mnist_logreg_unnormalized")
    assert other.get("eval/loss") is not None and other.get("train/loss") is not None


def test_run_folders_deeper_down_in_a_project_are_found(tmp_path: Path) -> None:
    # real layouts (holdout10): a script that ran in src/ or code/ leaves src/wandb/run-*/;
    # pointing at the project folder found nothing ("no training log found here")
    import shutil

    from curvediag.ingest import load_runs

    real = Path(__file__).resolve().parents[1] / "benchmarks/real_runs"
    for run_id, sub in (
        ("wbb_windfarm_lstm_encdec_overfit", "src"),
        ("wbb_bert_agreement_crash_nohistory", "code"),
    ):
        project = tmp_path / run_id
        shutil.copytree(real / run_id / sub, project / sub)
        (project / "node" / ".cache" / "wandb").mkdir(parents=True)  # hidden: not searched
        (runs,) = [load_runs(project)]
        assert len(runs) == 1 and f"{sub}/wandb/" in str(runs[0].source)
    assert (
        load_runs(tmp_path / "wbb_windfarm_lstm_encdec_overfit")[0].metrics["eval/loss"].values.size
        == 40
    )
