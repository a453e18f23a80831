"""Tests of the low-level TensorBoard event-file reader (curvediag.ingest._tfevents)."""

from __future__ import annotations

import math
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorboard")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from curvediag.errors import CurvediagWarning, MalformedRunError
from curvediag.ingest import _tfevents as tfe
from curvediag.ingest._tfevents import (
    EventFileData,
    iter_event_files,
    masked_crc32c,
    read_event_file,
    scalar_event,
    write_event_file,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "tensorboard"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CORPUS_FILES = sorted(CORPUS.glob("tb_*/events.out.tfevents*")) if CORPUS.is_dir() else []
ENCODINGS = ["simple", "float_val", "tensor_content", "double_val", "double_content"]


def read_quiet(path: Path | str, **kw: Any) -> EventFileData:
    """read_event_file with its CurvediagWarning captured (pytest turns warnings into errors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CurvediagWarning)
        return read_event_file(path, **kw)


# --------------------------------------------------------------------------------------------
# reference decoder: protobuf for every record, TensorBoard's rules for plugins
# --------------------------------------------------------------------------------------------


def reference(path: Path) -> tuple[dict[str, list[tuple[int, float, float]]], dict[str, str]]:
    data = path.read_bytes()
    off = 0
    plugin: dict[str, str] = {}
    vals: list[tuple[str, int | None, Any, float | None, bool]] = []
    while off + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        if off + 16 + n > len(data):
            break
        ev = Event.FromString(data[off + 12 : off + 12 + n])
        off += n + 16
        if ev.WhichOneof("what") != "summary":
            continue
        for v in ev.summary.value:
            if v.HasField("metadata") and v.tag not in plugin:
                plugin[v.tag] = v.metadata.plugin_data.plugin_name
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                vals.append((v.tag, ev.step, v.simple_value, ev.wall_time, True))
            elif kind == "tensor":
                x = tfe._tensor_scalar(v.tensor)
                if x is not None:
                    vals.append((v.tag, ev.step, x, ev.wall_time, False))
                elif v.tensor.dtype == 7:
                    vals.append((v.tag, None, tfe._tensor_text(v.tensor), None, False))
    scalars: dict[str, list[tuple[int, float, float]]] = {}
    texts: dict[str, str] = {}
    for tag, step, x, wall, simple in vals:
        if step is None:
            if plugin.get(tag) == "text":
                texts[tag] = x
        elif simple or plugin.get(tag, "") in ("", "scalars"):
            assert wall is not None
            scalars.setdefault(tag, []).append((step, x, wall))
    return scalars, texts


def assert_matches_reference(path: Path, got: EventFileData) -> None:
    scalars, texts = reference(path)
    assert list(got.scalars) == list(scalars)
    for tag, rows in scalars.items():
        col = got.scalars[tag]
        assert col.steps.dtype == np.int64
        assert col.values.dtype == np.float64
        assert col.wall_times.dtype == np.float64
        np.testing.assert_array_equal(col.steps, [r[0] for r in rows])
        np.testing.assert_array_equal(col.values, np.array([r[1] for r in rows], dtype=np.float64))
        np.testing.assert_array_equal(col.wall_times, [r[2] for r in rows])
    assert got.texts == texts


def make_run(
    path: Path, n_steps: int, encoding: str, tags: tuple[str, ...] = ("loss", "lr")
) -> Path:
    events: list[Any] = [Event(wall_time=1.7e9, file_version="brain.Event:2")]
    for step in range(n_steps):
        for k, tag in enumerate(tags):
            events.append(
                scalar_event(
                    tag,
                    1.0 / (step + 1) + k,
                    step,
                    1.7e9 + step + 0.01 * k,
                    encoding=encoding,
                    metadata=(step == 0 and encoding != "simple"),
                )
            )
    return write_event_file(path, events)


# --------------------------------------------------------------------------------------------
# both encodings, bulk path == protobuf path
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("check_crc", [True, False])
def test_encodings_roundtrip(tmp_path: Path, encoding: str, check_crc: bool) -> None:
    path = make_run(tmp_path / "events.out.tfevents.1.host", 50, encoding)
    got = read_event_file(path, check_crc=check_crc)
    assert got.warnings == []
    assert got.file_version == "brain.Event:2"
    assert list(got.scalars) == ["loss", "lr"]
    loss = got.scalars["loss"]
    np.testing.assert_array_equal(loss.steps, np.arange(50))
    expected = np.array([1.0 / (s + 1) for s in range(50)])
    if encoding in ("simple", "float_val", "tensor_content"):
        expected = expected.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(loss.values, expected)
    np.testing.assert_array_equal(loss.wall_times, 1.7e9 + np.arange(50))
    assert len(loss) == 50
    assert_matches_reference(path, got)


@pytest.mark.parametrize("encoding", ["simple", "tensor_content", "double_val"])
def test_large_file_uses_bulk_path_and_matches_protobuf(tmp_path: Path, encoding: str) -> None:
    # > 64 KiB: vectorized framing; steps past 2**7, 2**14 and 2**21 exercise varint widths
    events: list[Any] = [Event(wall_time=1.7e9, file_version="brain.Event:2")]
    steps = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**35, -5]
    steps += list(range(1000, 4000))
    for i, s in enumerate(steps):
        tag = f"metric/{i % 5}" + "x" * (i % 3)
        events.append(
            scalar_event(tag, math.sin(i), s, 1.7e9 + i, encoding=encoding, metadata=i < 15)
        )
    path = write_event_file(tmp_path / "events.out.tfevents.2.host", events)
    assert path.stat().st_size > tfe._VECTOR_FRAMING_MIN
    got = read_event_file(path)
    assert got.warnings == []
    assert_matches_reference(path, got)
    all_steps = np.concatenate([c.steps for c in got.scalars.values()])
    assert sorted(all_steps.tolist()) == sorted(steps)


def test_nan_inf_preserved(tmp_path: Path) -> None:
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 3.5]
    for enc in ENCODINGS:
        events = [scalar_event("x", v, i, 1.0 + i, encoding=enc) for i, v in enumerate(specials)]
        path = write_event_file(tmp_path / f"events.out.tfevents.3.{enc}", events)
        vals = read_event_file(path).scalars["x"].values
        assert math.isnan(vals[0])
        assert vals[1] == math.inf and vals[2] == -math.inf
        assert vals[3] == 0.0 and math.copysign(1, vals[3]) == -1
        assert vals[4] == 3.5


def test_file_order_kept_not_sorted_or_deduplicated(tmp_path: Path) -> None:
    steps = [5, 3, 3, 10, 1]
    events = [scalar_event("a", float(i), s, 100.0 + i) for i, s in enumerate(steps)]
    path = write_event_file(tmp_path / "events.out.tfevents.4.h", events)
    col = read_event_file(path).scalars["a"]
    assert col.steps.tolist() == steps
    assert col.values.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_multi_value_summaries_and_unusual_events(tmp_path: Path) -> None:
    """TF1 merged summaries, node_name, histograms, images, graphs, log messages, int tensors."""
    hist = Summary.Value(tag="h", histo={"min": 0.0, "max": 1.0, "bucket": [1, 2]})
    img = Summary.Value(tag="img", image={"height": 1, "width": 1, "encoded_image_string": b"x"})
    merged = Summary(
        value=[
            Summary.Value(tag="a", simple_value=1.5),
            hist,
            Summary.Value(tag="b", simple_value=2.5, node_name="node"),
            img,
        ]
    )
    int_t = TensorProto(dtype=9, int64_val=[42])
    int_t.tensor_shape.SetInParent()
    half_t = TensorProto(dtype=19, half_val=[int(np.array([0.5], np.float16).view(np.uint16)[0])])
    half_t.tensor_shape.SetInParent()
    vec_t = TensorProto(dtype=1, float_val=[1.0, 2.0])
    vec_t.tensor_shape.dim.add(size=2)
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    other = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="custom_plugin"))
    events = [
        Event(wall_time=1.0, file_version="brain.Event:2"),
        Event(wall_time=2.0, step=1, summary=merged),
        Event(wall_time=3.0, graph_def=b"\x0a\x00" * 50),
        Event(
            wall_time=4.0,
            step=2,
            summary=Summary(value=[Summary.Value(tag="i", tensor=int_t, metadata=meta)]),
        ),
        Event(
            wall_time=5.0, step=3, summary=Summary(value=[Summary.Value(tag="f16", tensor=half_t)])
        ),
        Event(
            wall_time=6.0, step=4, summary=Summary(value=[Summary.Value(tag="vec", tensor=vec_t)])
        ),
        Event(
            wall_time=7.0,
            step=5,
            summary=Summary(value=[Summary.Value(tag="o", tensor=half_t, metadata=other)]),
        ),
        Event(
            wall_time=8.0, step=6, summary=Summary(value=[Summary.Value(tag="a", simple_value=3.5)])
        ),
        Event(
            step=7, summary=Summary(value=[Summary.Value(tag="a", simple_value=4.5)])
        ),  # no wall time
    ]
    path = write_event_file(tmp_path / "events.out.tfevents.5.h", events)
    got = read_event_file(path)
    assert got.warnings == []
    assert list(got.scalars) == ["a", "b", "i", "f16"]
    assert got.scalars["a"].values.tolist() == [1.5, 3.5, 4.5]
    assert got.scalars["a"].steps.tolist() == [1, 6, 7]
    assert got.scalars["a"].wall_times.tolist() == [2.0, 8.0, 0.0]
    assert got.scalars["b"].values.tolist() == [2.5]
    assert got.scalars["i"].values.tolist() == [42.0]
    assert got.scalars["f16"].values.tolist() == [0.5]
    assert_matches_reference(path, got)


def test_text_summaries_last_wins(tmp_path: Path) -> None:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))

    def text_event(tag: str, text: str, step: int, with_meta: bool = True) -> Event:
        t = TensorProto(dtype=7, string_val=[text.encode()])
        t.tensor_shape.dim.add(size=1)
        v = Summary.Value(tag=tag, tensor=t)
        if with_meta:
            v.metadata.CopyFrom(meta)
        return Event(wall_time=1.0, step=step, summary=Summary(value=[v]))

    events = [
        text_event("args/text_summary", "first", 0),
        scalar_event("loss", 1.0, 0, 1.0),
        text_event("args/text_summary", "second — ünïcode", 1),
        text_event("model_config/text_summary", '{"a": 1}', 0),
        text_event("not_text", "no plugin", 0, with_meta=False),
    ]
    path = write_event_file(tmp_path / "events.out.tfevents.6.h", events)
    got = read_event_file(path)
    assert got.texts == {
        "args/text_summary": "second — ünïcode",
        "model_config/text_summary": '{"a": 1}',
    }
    assert list(got.scalars) == ["loss"]


# --------------------------------------------------------------------------------------------
# damaged files
# --------------------------------------------------------------------------------------------


def test_truncated_last_record(tmp_path: Path) -> None:
    path = make_run(tmp_path / "events.out.tfevents.7.h", 20, "simple")
    data = path.read_bytes()
    for cut in (1, 5, 20):
        p = tmp_path / f"events.out.tfevents.7.cut{cut}"
        p.write_bytes(data[:-cut])
        with pytest.warns(CurvediagWarning, match="truncated"):
            got = read_event_file(p)
        assert len(got.warnings) == 1
        assert str(p) in got.warnings[0] and "offset" in got.warnings[0]
        assert len(got.scalars["loss"]) == 20 and len(got.scalars["lr"]) == 19


def test_truncated_header(tmp_path: Path) -> None:
    path = make_run(tmp_path / "events.out.tfevents.8.h", 3, "simple")
    p = tmp_path / "events.out.tfevents.8.x"
    p.write_bytes(path.read_bytes() + b"\x10\x00\x00")
    got = read_quiet(p)
    assert "truncated record header" in got.warnings[0]
    assert len(got.scalars["loss"]) == 3


def test_crc_mismatch(tmp_path: Path) -> None:
    path = make_run(tmp_path / "events.out.tfevents.9.h", 10, "simple")
    data = bytearray(path.read_bytes())
    # find the 3rd record and flip a byte of its value (last 5 bytes: 4 value bytes + crc)
    off = 0
    for _ in range(3):
        (n,) = struct.unpack_from("<Q", data, off)
        off += n + 16
    (n,) = struct.unpack_from("<Q", data, off)
    data[off + 12 + n - 1] ^= 0x55
    p = tmp_path / "events.out.tfevents.9.bad"
    p.write_bytes(bytes(data))
    with pytest.warns(CurvediagWarning, match="checksum"):
        got = read_event_file(p)
    assert len(got.warnings) == 1 and f"offset {off}" in got.warnings[0]
    assert len(got.scalars["loss"]) + len(got.scalars["lr"]) == 19
    # without checks the corrupted value is read as written
    unchecked = read_event_file(p, check_crc=False)
    assert unchecked.warnings == []
    assert len(unchecked.scalars["loss"]) + len(unchecked.scalars["lr"]) == 20


def test_corrupt_header_and_garbage_tail(tmp_path: Path) -> None:
    path = make_run(tmp_path / "events.out.tfevents.10.h", 10, "simple")
    good = path.read_bytes()
    p = tmp_path / "events.out.tfevents.10.garbage"
    p.write_bytes(good + bytes(range(256)) * 3)
    got = read_quiet(p)
    assert len(got.warnings) == 1 and f"offset {len(good)}" in got.warnings[0]
    assert len(got.scalars["loss"]) == 10
    # a corrupted length in the middle: everything before it is kept
    data = bytearray(good)
    (n,) = struct.unpack_from("<Q", data, 0)
    second = n + 16
    data[second] ^= 0x01
    p2 = tmp_path / "events.out.tfevents.10.hdr"
    p2.write_bytes(bytes(data))
    got2 = read_quiet(p2)
    assert "corrupt record header" in got2.warnings[0] or "truncated" in got2.warnings[0]
    assert got2.scalars == {}
    assert got2.file_version == "brain.Event:2"


def test_zero_length_file(tmp_path: Path) -> None:
    p = tmp_path / "events.out.tfevents.11.h"
    p.write_bytes(b"")
    with pytest.warns(CurvediagWarning, match="empty"):
        got = read_event_file(p)
    assert got.scalars == {} and got.texts == {} and got.file_version is None
    assert got.warnings and str(p) in got.warnings[0]


@pytest.mark.parametrize(
    "content",
    [b"hello world, this is not an event file at all" * 3, b"\x00" * 7, b"{}\n", bytes(range(40))],
)
def test_garbage_file_raises(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "events.out.tfevents.12.h"
    p.write_bytes(content)
    with pytest.raises(MalformedRunError) as info:
        read_event_file(p)
    assert info.value.path == str(p)


def test_valid_framing_but_not_an_event(tmp_path: Path) -> None:
    p = tmp_path / "events.out.tfevents.13.h"
    write_event_file(p, [b"\xff\xff\xff\xff"])
    with pytest.raises(MalformedRunError, match="not a TensorBoard Event"):
        read_event_file(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MalformedRunError):
        read_event_file(tmp_path / "nope")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_damage_never_raises_anything_else(tmp_path: Path, data: st.DataObject) -> None:
    encoding = data.draw(st.sampled_from(ENCODINGS))
    base = tmp_path / f"base_{encoding}"
    if not base.exists():
        make_run(base, 6, encoding, tags=("loss", "lr", "acc"))
    raw = bytearray(base.read_bytes())
    mode = data.draw(st.sampled_from(["truncate", "flip", "random", "append"]))
    if mode == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    elif mode == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= data.draw(st.integers(1, 255))
    elif mode == "random":
        raw = bytearray(data.draw(st.binary(max_size=300)))
    else:
        raw += data.draw(st.binary(min_size=1, max_size=64))
    p = tmp_path / "events.out.tfevents.14.h"
    p.write_bytes(bytes(raw))
    for check in (True, False):
        try:
            got = read_quiet(p, check_crc=check)
        except MalformedRunError:
            continue
        for col in got.scalars.values():
            assert col.steps.shape == col.values.shape == col.wall_times.shape


# --------------------------------------------------------------------------------------------
# writer, crc, file discovery
# --------------------------------------------------------------------------------------------


def test_masked_crc_known_values() -> None:
    # CRC-32C check value, and the masked CRC of an all-zero 8-byte header
    assert tfe._crc32c(b"123456789") == 0xE3069283
    assert tfe._crc32c_py(b"123456789") == 0xE3069283
    assert tfe._VCRC.single(b"123456789" * 100) == tfe._crc32c_py(b"123456789" * 100)
    crc = tfe._crc32c_py(b"\x00" * 8)
    assert masked_crc32c(b"\x00" * 8) == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_vectorized_crc_matches_scalar() -> None:
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, size=5000, dtype=np.uint8)
    starts = rng.integers(0, 4000, size=300).astype(np.int64)
    lens = rng.integers(0, 900, size=300).astype(np.int64)
    lens = np.minimum(lens, 5000 - starts)
    got = tfe._VCRC.many(buf, starts, lens)
    want = [tfe._crc32c_py(buf[s : s + n].tobytes()) for s, n in zip(starts, lens, strict=True)]
    assert got.tolist() == want


def test_iter_event_files(tmp_path: Path) -> None:
    for rel in [
        "b/events.out.tfevents.200.host.1.0",
        "b/events.out.tfevents.100.host.2.0",
        "a/events.out.tfevents",
        "a/sub/events.out.tfevents.5.x.v2",
        "a/not_events.txt",
        "a/events.out.tfevents.3.x.v2",
    ]:
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    names = [p.relative_to(tmp_path).as_posix() for p in iter_event_files(tmp_path)]
    assert names == [
        "a/events.out.tfevents",
        "a/events.out.tfevents.3.x.v2",
        "a/sub/events.out.tfevents.5.x.v2",
        "b/events.out.tfevents.100.host.2.0",
        "b/events.out.tfevents.200.host.1.0",
    ]
    single = tmp_path / "a" / "events.out.tfevents"
    assert iter_event_files(single) == [single]


# --------------------------------------------------------------------------------------------
# real writers: fixtures and the corpus
# --------------------------------------------------------------------------------------------


def test_fixture_tensorboardx() -> None:
    (path,) = iter_event_files(FIXTURES / "tensorboardx")
    got = read_event_file(path)
    assert got.warnings == []
    assert list(got.scalars) == ["train/loss", "train/lr", "eval/loss"]
    loss = got.scalars["train/loss"]
    assert len(loss) == 30 and math.isnan(loss.values[7]) and loss.values[8] == math.inf
    assert got.scalars["eval/loss"].steps.tolist() == [9, 19, 29]
    assert got.texts == {"notes/text_summary": "fixture written by tensorboardX"}
    assert_matches_reference(path, got)


def test_fixture_tf2_tensor() -> None:
    (path,) = iter_event_files(FIXTURES / "tf2_tensor")
    got = read_event_file(path)
    assert got.warnings == []
    assert list(got.scalars) == ["epoch_loss", "epoch_accuracy"]
    assert got.scalars["epoch_loss"].steps.tolist() == list(range(30))
    assert got.scalars["epoch_loss"].values[0] == pytest.approx(2.1, rel=1e-6)
    assert_matches_reference(path, got)


def test_fixture_truncated() -> None:
    (path,) = iter_event_files(FIXTURES / "truncated")
    with pytest.warns(CurvediagWarning, match="truncated last record"):
        got = read_event_file(path)
    assert len(got.scalars["train/loss"]) == 30
    assert got.texts == {}  # the text summary was the record cut short


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS_FILES, reason="shared/corpus not present")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("check_crc", [True, False])
def test_corpus_file(path: Path, check_crc: bool) -> None:
    got = read_event_file(path, check_crc=check_crc)
    assert got.warnings == []
    assert_matches_reference(path, got)
    name = path.parent.name
    if name == "tb_catboost":
        assert list(got.scalars) == ["Logloss"] and len(got.scalars["Logloss"]) == 364
        assert got.file_version is None
    else:
        assert got.file_version == "brain.Event:2"
    if name == "tb_hf_gemma2b":
        assert got.scalars == {}
        assert set(got.texts) == {"args/text_summary", "model_config/text_summary"}
    if name == "tb_hf_lain":
        assert len(got.scalars["train/loss"]) == 6
        assert "args/text_summary" in got.texts
    if name == "tb_keras_hparam_exp0":
        assert len(got.scalars["batch_loss"]) == 15000
        assert got.hparams == {"optimizer": "adam", "units": 200.0, "dropout": 0.2}
    if name.startswith("tb_keras_mnist_sgd"):
        assert len(got.scalars["epoch_loss"]) == 10


def test_without_crc32c_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_run(tmp_path / "events.out.tfevents.15.h", 2000, "tensor_content")
    expected = read_event_file(path)
    monkeypatch.setattr(tfe, "_crc32c_mod", None)
    got = read_event_file(path)
    assert got.warnings == []
    for tag, col in expected.scalars.items():
        np.testing.assert_array_equal(got.scalars[tag].values, col.values)
    big = write_event_file(tmp_path / "events.out.tfevents.16.h", [Event(graph_def=b"g" * 5000)])
    assert read_event_file(big).warnings == []


def test_chunked_decoding_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_run(tmp_path / "events.out.tfevents.17.h", 300, "simple", tags=("a", "b", "c"))
    whole = read_event_file(path)
    monkeypatch.setattr(tfe, "_CHUNK_RECORDS", 7)
    chunked = read_event_file(path)
    assert list(chunked.scalars) == list(whole.scalars)
    for tag, col in whole.scalars.items():
        np.testing.assert_array_equal(chunked.scalars[tag].steps, col.steps)
        np.testing.assert_array_equal(chunked.scalars[tag].values, col.values)
    assert_matches_reference(path, chunked)


def test_lightning_step_and_epoch_pairs_are_two_series(tmp_path: Path) -> None:
    """Lightning's ``self.log(..., on_step=True, on_epoch=True)`` writes ``train_loss_step`` and
    ``train_loss_epoch`` to TensorBoard too: the per-step values are the train-loss curve, the
    epoch means a series of their own (not interleaved into it), and for validation the epoch
    aggregate is the curve."""
    import curvediag

    events: list[Any] = [Event(wall_time=1.7e9, file_version="brain.Event:2")]
    for step in range(1, 41):
        events.append(scalar_event("train_loss_step", 1.0 / step, step, 1.7e9 + step))
        if step % 20 == 0:
            events.append(scalar_event("train_loss_epoch", 3.0 / step, step, 1.7e9 + step))
            events.append(scalar_event("val_loss_epoch", 2.0 / step, step, 1.7e9 + step))
            events.append(scalar_event("val_loss_step", 9.0, step, 1.7e9 + step))
    write_event_file(tmp_path / "events.out.tfevents.1.host", events)
    run = curvediag.load_run(tmp_path)
    assert run.metrics["train/loss"].steps.tolist() == list(range(1, 41))
    assert run.metrics["train/loss_epoch"].steps.tolist() == [20, 40]
    assert run.metrics["eval/loss"].values.tolist() == pytest.approx([0.1, 0.05])
    assert "eval/loss_step" in run.metrics


def test_a_real_lightning_event_file_keeps_its_epoch_means_apart() -> None:
    # a real run (benchmarks/real_runs/tb_dagger_racecar_optuna): 438 train_loss_step logs and 26
    # train_loss_epoch means; interleaved, the first epoch's mean (0.54, after a first epoch
    # whose single batches were at 0.006-0.06) read as a 65x loss spike
    import curvediag

    run = curvediag.load_run(ROOT / "benchmarks/real_runs/tb_dagger_racecar_optuna")
    assert run.metrics["train/loss"].values.size == 438
    assert run.metrics["train/loss_epoch"].values[0] == pytest.approx(0.5415, abs=1e-4)
    assert "loss-spike" not in curvediag.diagnose(run).finding_ids


def test_a_yolo_event_file_takes_its_planned_epochs_from_opt_yaml() -> None:
    # YOLOv5/v7 write their train.py options to opt.yaml beside the event file. Two real runs
    # (benchmarks/real_runs): a YOLOv7 run that logged 20 of the 30 epochs in its opt.yaml, and
    # one that logged all 25 of its 25
    import curvediag

    real = ROOT / "benchmarks/real_runs"
    cut = curvediag.load_run(real / "tb20c_yolov7_visual_pollution_20of30ep/exp4")
    assert cut.meta.num_train_epochs == 30.0
    assert "run-ended-early" in curvediag.diagnose(cut).finding_ids
    done = curvediag.load_run(real / "tb20c_yolov7_drone_25ep/yolov7-custom")
    assert done.meta.num_train_epochs == 25.0
    assert "run-ended-early" not in curvediag.diagnose(done).finding_ids


@pytest.mark.parametrize(
    ("name", "held_out"),
    [
        ("train/val_loss", True),
        ("train/Loss/val", True),
        ("train/ValLoss", True),
        ("train/valloss", True),
        ("train/Validate_Loss", True),
        ("train/vali_loss", True),
        ("train/testset_loss", True),
        ("train/VAL_LOSS", True),
        ("train/value_loss", False),
        ("train/losses/value_loss", False),
        ("train/retrieval_loss", False),
        ("train/device_loss", False),
        ("train/latest_loss", False),
    ],
)
def test_a_loss_is_an_evaluations_only_when_a_word_of_its_name_says_so(
    name: str, held_out: bool
) -> None:
    from curvediag.normalize import _names_eval

    assert _names_eval(name) is held_out


def test_an_rl_critics_value_loss_is_not_read_as_an_eval_loss() -> None:
    # a real Stable-Baselines3 PPO log (benchmarks/real_runs/tb35b_highway_ppo_20k_reward_rising):
    # "val" inside train/value_loss made the critic's loss, which grows with the returns, the
    # run's eval loss, and "eval loss rising" fired on a healthy run
    import curvediag

    run = curvediag.load_run(ROOT / "benchmarks/real_runs/tb35b_highway_ppo_20k_reward_rising")
    assert "train/value_loss" in run.metrics
    assert "eval/loss" not in run.metrics
    assert "eval-loss-rising" not in curvediag.diagnose(run).finding_ids


def test_an_rl_run_is_judged_by_its_return_not_its_loss(tmp_path: Path) -> None:
    # real Stable-Baselines3 PPO logs (benchmarks/real_runs): PPO's loss grows with the returns
    # its critic predicts, and loss-diverging called a healthy run (return 8.3 -> 26.6)
    # critical; a run whose return decays (-181 -> -452) was called healthy
    import curvediag
    from curvediag.report.plots import available_plots

    real = ROOT / "benchmarks/real_runs"
    healthy = curvediag.load_run(real / "tb35b_highway_ppo_20k_reward_rising")
    assert "train/loss" not in healthy.metrics and "train/rl_loss" in healthy.metrics
    assert any("reinforcement-learning run" in w for w in healthy.warnings)
    d = curvediag.diagnose(healthy)
    assert d.verdict == "healthy" and not d.findings
    decaying = curvediag.diagnose(real / "tb34b_pendulum_acmpc_ppo_reward_decay")
    assert decaying.finding_ids == ["rl-return-falling"]
    assert available_plots(decaying)[0] == "return"
    # a GRPO run's reward is not an episode return: its loss stays the loss
    grpo = curvediag.load_run(real / "ts_gemma3_grpo")
    assert "train/loss" in grpo.metrics and "train/rl_loss" not in grpo.metrics
