"""Fast, low-level reader of TensorBoard event files (``events.out.tfevents.*``).

An event file is a sequence of records, each framed as::

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

where ``data`` is a serialized ``tensorboard.compat.proto.event_pb2.Event``. Scalars come either as
``summary.value[i].simple_value`` (TF1, tensorboardX, torch's ``SummaryWriter``, the HF Trainer,
CatBoost) or as a scalar ``summary.value[i].tensor`` (TF2 ``tf.summary.scalar``, Keras ``*.v2``
files), the latter with ``metadata.plugin_data.plugin_name == "scalars"`` often only on the first
event of a tag.

How it is fast: the framing is a tight loop over offsets; the protobuf wire format of every record
is then parsed *in bulk* with numpy, one field at a time for all records at once (a record's
cursor advances field by field, so the usual layouts, omitted default fields, any varint width and
several values per summary are all handled without per-event Python work). Records whose layout
the bulk parser does not know (the ``file_version`` event, graphs, text summaries, unusual tensor
encodings, ...) go through protobuf (``Event.FromString``) one by one. CRCs are checked with the
``crc32c`` package when it is importable and with a vectorized numpy CRC-32C otherwise.

This module depends only on numpy, the protos shipped by the ``tensorboard`` package (imported on
first use) and :mod:`curvediag.errors`.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import struct
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from curvediag.errors import CurvediagWarning, MalformedRunError
from curvediag.ingest._progress import tell
from curvediag.ingest._protowire import B1, F64, I64, U8, U32, U64, Buf, window

if TYPE_CHECKING:
    from tensorboard.compat.proto.event_pb2 import Event

_crc32c_mod: Any
try:  # optional speed-up; a vectorized numpy CRC-32C is used without it
    import crc32c as _crc32c_mod
except ImportError:  # pragma: no cover - depends on the environment
    _crc32c_mod = None

__all__ = [
    "EventFileData",
    "ScalarColumn",
    "iter_event_files",
    "masked_crc32c",
    "read_event_file",
    "scalar_event",
    "write_event_file",
]


HAVE_CRC32C_PACKAGE: bool = _crc32c_mod is not None
"""Whether the fast ``crc32c`` package is importable (CRCs are checked either way)."""

_EVENT_FILE_RE = re.compile(r"^events\.out\.tfevents(?:\.(\d+))?(?:\..*)?$")
_HEADER = struct.Struct("<QI")
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_POLY = 0x82F63B78
_MAX_WARNINGS_PER_KIND = 5
_MAX_VALUES_PER_SUMMARY = 64
_MAX_FIELDS = 16

# TensorFlow DataType enum values (tensorboard/compat/proto/types.proto).
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_UINT8, _DT_INT16, _DT_INT8 = 1, 2, 3, 4, 5, 6
_DT_STRING, _DT_INT64, _DT_BOOL, _DT_BFLOAT16, _DT_UINT16, _DT_HALF = 7, 9, 10, 14, 17, 19
_DT_UINT32, _DT_UINT64 = 22, 23
_CONTENT_DTYPES: dict[int, str] = {
    _DT_FLOAT: "<f4",
    _DT_DOUBLE: "<f8",
    _DT_HALF: "<f2",
    _DT_INT32: "<i4",
    _DT_INT64: "<i8",
    _DT_INT16: "<i2",
    _DT_INT8: "i1",
    _DT_UINT8: "u1",
    _DT_UINT16: "<u2",
    _DT_UINT32: "<u4",
    _DT_UINT64: "<u8",
    _DT_BOOL: "?",
}
_SCALAR_PLUGINS = frozenset({"", "scalars"})

# Value kinds found by the bulk parser.
_K_NONE, _K_SIMPLE, _K_TENSOR, _K_SKIP = 0, 1, 2, 3


# --------------------------------------------------------------------------------------------
# Public data model
# --------------------------------------------------------------------------------------------


@dataclass
class ScalarColumn:
    """The points of one scalar tag, in file order (not sorted, not deduplicated).

    Attributes:
        steps: int64 global steps.
        values: float64 values; NaN and +-Inf are kept exactly as written.
        wall_times: float64 seconds since the epoch.
    """

    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    wall_times: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.steps.shape[0])


@dataclass
class EventFileData:
    """Everything curvediag keeps from one event file.

    Attributes:
        path: The file that was read.
        scalars: Tag -> points, in file order. Holds ``simple_value`` scalars and scalar numeric
            tensors whose tag belongs to the ``scalars`` plugin (or to no plugin).
        texts: Text-plugin summaries, tag -> decoded text (the last one of a tag wins), e.g. the
            HF Trainer's ``args/text_summary`` and ``model_config/text_summary``.
        hparams: Hyperparameters from the hparams plugin's ``session_start_info``, if present.
        file_version: The ``file_version`` event's string, e.g. ``'brain.Event:2'``.
        warnings: Human-readable problems found (truncated record, CRC mismatch, ...), each
            naming the file and the byte offset.
    """

    path: str
    scalars: dict[str, ScalarColumn] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    hparams: dict[str, object] = field(default_factory=dict)
    file_version: str | None = None
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli), scalar and vectorized
# --------------------------------------------------------------------------------------------


def _byte_table() -> U32:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    return t


_T: U32 = _byte_table()
_T_LIST: list[int] = [int(x) for x in _T]


def _crc32c_py(data: bytes | memoryview, crc: int = 0) -> int:
    """Plain CRC-32C of a short buffer (pure Python)."""
    r = crc ^ 0xFFFFFFFF
    t = _T_LIST
    for b in bytes(data):
        r = t[(r ^ b) & 0xFF] ^ (r >> 8)
    return r ^ 0xFFFFFFFF


class _VectorCrc:
    """Vectorized CRC-32C of many short byte strings (or one long one) with numpy.

    CRC-32C is affine in its input: with the initial register folded into the first four bytes
    (``0xFF`` xor), the register after a message is the xor over byte positions of a table entry
    that depends only on the byte and its distance to the end. Rows of a matrix of messages
    (front-padded with zeros, which do not change a zero register) are therefore reduced with one
    16-bit table look-up per byte pair.
    """

    def __init__(self) -> None:
        self._p: list[U32] = [_T.copy()]  # _p[k][b]: byte b followed by k zero bytes
        self._q: list[U32] = []  # _q[k][lo | hi << 8]: byte pair followed by 2k zero bytes

    def _shift1(self, x: U32) -> U32:
        out: U32 = _T[x & np.uint32(0xFF)] ^ (x >> np.uint32(8))
        return out

    def _pair_table(self, k: int) -> U32:
        while len(self._q) <= k:
            j = len(self._q)
            self._byte_tables(2 * j + 1)
            hi, lo = self._p[2 * j], self._p[2 * j + 1]
            self._q.append((hi[:, None] ^ lo[None, :]).ravel())
        return self._q[k]

    def rows(self, rows: U8) -> U32:
        """Register after each row (zero initial register; front zero-padding is neutral)."""
        n, w = rows.shape
        acc = np.zeros(n, dtype=np.uint32)
        if w % 2:
            self._byte_tables(w - 1)
            acc ^= self._p[w - 1][rows[:, 0]]
            rows = rows[:, 1:]
            w -= 1
        pairs = (
            rows.view("<u2") if rows.flags.c_contiguous else np.ascontiguousarray(rows).view("<u2")
        )
        half = w // 2
        for q in range(half):
            k = half - 1 - q
            if k < _MAX_PAIR_TABLES:  # 16-bit tables (256 KiB each) for the last bytes
                acc ^= self._pair_table(k)[pairs[:, q]]
            else:  # byte tables (1 KiB each) further from the end
                self._byte_tables(2 * k + 1)
                col = pairs[:, q]
                acc ^= (
                    self._p[2 * k + 1][col & np.uint16(0xFF)] ^ self._p[2 * k][col >> np.uint16(8)]
                )
        return acc

    def _byte_tables(self, k: int) -> None:
        while len(self._p) <= k:
            self._p.append(self._shift1(self._p[-1]))

    def many(self, buf: U8, starts: I64, lens: I64) -> U32:
        """Plain CRC-32C of ``buf[starts[i]:starts[i]+lens[i]]`` for every i."""
        out = np.zeros(starts.shape[0], dtype=np.uint32)
        if starts.shape[0] == 0:
            return out
        short = (lens >= 4) & (lens <= 512)
        for i in np.flatnonzero(~short).tolist():
            s, n = int(starts[i]), int(lens[i])
            out[i] = _crc32c(buf[s : s + n].tobytes())
        sel = np.flatnonzero(short)
        if sel.size == 0:
            return out
        ls = lens[sel]
        distinct = np.flatnonzero(np.bincount(ls, minlength=513))
        if distinct.size > 64:
            order = np.argsort(ls, kind="stable")
            cuts = np.flatnonzero(np.diff(ls[order])) + 1
            groups = np.split(sel[order], cuts)
        else:
            groups = [sel[ls == n] for n in distinct.tolist()]
        for idx in groups:
            n = int(lens[idx[0]])
            win = window(buf, n)
            for c0 in range(0, idx.size, 32768):
                ci = idx[c0 : c0 + 32768]
                rows = win[starts[ci]]
                rows[:, :4] ^= np.uint8(0xFF)  # fold in the initial register
                out[ci] = self.rows(rows) ^ np.uint32(0xFFFFFFFF)
        return out

    def single(self, data: bytes) -> int:
        """Plain CRC-32C of one buffer of any length."""
        n = len(data)
        if n < 512:
            return _crc32c_py(data)
        w = 256
        nrows = -(-n // w)
        flat = np.zeros(nrows * w, dtype=np.uint8)
        flat[nrows * w - n :] = np.frombuffer(data, dtype=np.uint8)
        flat[nrows * w - n : nrows * w - n + 4] ^= np.uint8(0xFF)
        acc = self.rows(flat.reshape(nrows, w))
        # combine rows pairwise: crc(A || B) = shift_len(B)(crc(A)) ^ crc(B) (zero register)
        tables = self._shift_tables(w)
        while acc.shape[0] > 1:
            if acc.shape[0] % 2:
                acc = np.concatenate([np.zeros(1, np.uint32), acc])
            a, b = acc[0::2], acc[1::2]
            acc = self._apply(tables, a) ^ b
            tables = self._compose(tables)
        return int(acc[0]) ^ 0xFFFFFFFF

    def _shift_tables(self, nbytes: int) -> U32:
        x = (
            np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]
        ).astype(np.uint32)
        for _ in range(nbytes):
            x = self._shift1(x)
        return x

    @staticmethod
    def _apply(tables: U32, x: U32) -> U32:
        out: U32 = (
            tables[0][x & np.uint32(0xFF)]
            ^ tables[1][(x >> np.uint32(8)) & np.uint32(0xFF)]
            ^ tables[2][(x >> np.uint32(16)) & np.uint32(0xFF)]
            ^ tables[3][x >> np.uint32(24)]
        )
        return out

    def _compose(self, tables: U32) -> U32:
        out: U32 = self._apply(tables, tables.ravel()).reshape(4, 256)
        return out


_VCRC = _VectorCrc()


def _crc32c(data: bytes | memoryview) -> int:
    if _crc32c_mod is not None:
        return int(_crc32c_mod.crc32c(data))
    return _VCRC.single(bytes(data))


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _mask_np(crc: U32) -> U32:
    c = crc.astype(np.uint64)
    out: U32 = (
        (((c >> np.uint64(15)) | (c << np.uint64(17))) + np.uint64(_MASK_DELTA))
        & np.uint64(0xFFFFFFFF)
    ).astype(np.uint32)
    return out


def masked_crc32c(data: bytes | memoryview) -> int:
    """The masked CRC-32C that TFRecord framing stores after the length and after the data.

    Args:
        data: The bytes to checksum.

    Returns:
        The masked checksum as an unsigned 32-bit integer.
    """
    return _mask(_crc32c(data))


# --------------------------------------------------------------------------------------------
# Writing (tests, fixtures and benchmarks)
# --------------------------------------------------------------------------------------------


def _frame(data: bytes) -> bytes:
    header = _U64.pack(len(data))
    return header + _U32.pack(masked_crc32c(header)) + data + _U32.pack(masked_crc32c(data))


def write_event_file(path: str | os.PathLike[str], events: Iterable[Event | bytes]) -> Path:
    """Write events to ``path`` with TFRecord framing and correct masked CRCs.

    Args:
        path: The file to (over)write.
        events: ``Event`` protos, or already serialized ``Event`` bytes.

    Returns:
        The path written.
    """
    out = Path(path)
    with out.open("wb") as fh:
        chunk: list[bytes] = []
        for ev in events:
            data = ev if isinstance(ev, bytes) else ev.SerializeToString()
            chunk.append(_frame(data))
            if len(chunk) >= 4096:
                fh.write(b"".join(chunk))
                chunk.clear()
        fh.write(b"".join(chunk))
    return out


def scalar_event(
    tag: str,
    value: float,
    step: int,
    wall_time: float,
    *,
    encoding: str = "simple",
    metadata: bool = False,
) -> Event:
    """Build one scalar ``Event`` the way common writers do.

    Args:
        tag: The summary tag.
        value: The scalar value.
        step: The global step.
        wall_time: Seconds since the epoch.
        encoding: ``"simple"`` (``simple_value``, TF1/torch/tensorboardX), ``"float_val"``,
            ``"tensor_content"`` (TF2, DT_FLOAT), ``"double_val"`` or ``"double_content"``
            (DT_DOUBLE).
        metadata: Attach ``plugin_data {plugin_name: "scalars"}`` (TF2 writes it on the first
            event of a tag, Keras on every event).

    Returns:
        The event proto.
    """
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto

    val = Summary.Value(tag=tag)
    if encoding == "simple":
        val.simple_value = value
    elif encoding == "float_val":
        val.tensor.CopyFrom(TensorProto(dtype=_DT_FLOAT, float_val=[value]))
    elif encoding == "tensor_content":
        val.tensor.CopyFrom(TensorProto(dtype=_DT_FLOAT, tensor_content=struct.pack("<f", value)))
    elif encoding == "double_val":
        val.tensor.CopyFrom(TensorProto(dtype=_DT_DOUBLE, double_val=[value]))
    elif encoding == "double_content":
        val.tensor.CopyFrom(TensorProto(dtype=_DT_DOUBLE, tensor_content=struct.pack("<d", value)))
    else:
        raise ValueError(f"unknown encoding {encoding!r}")
    if encoding != "simple":
        val.tensor.tensor_shape.SetInParent()
    if metadata:
        val.metadata.CopyFrom(
            SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
        )
    return Event(wall_time=wall_time, step=step, summary=Summary(value=[val]))


# --------------------------------------------------------------------------------------------
# Finding event files
# --------------------------------------------------------------------------------------------


def _file_key(p: Path) -> tuple[str, int, str]:
    m = _EVENT_FILE_RE.match(p.name)
    ts = int(m.group(1)) if m and m.group(1) else 0
    return (str(p.parent), ts, p.name)


def iter_event_files(folder: str | os.PathLike[str]) -> list[Path]:
    """List the event files under ``folder`` (recursively, symlinked folders not followed).

    Names matched: ``events.out.tfevents`` (CatBoost) and ``events.out.tfevents.*``.

    Args:
        folder: A folder, or a single event file.

    Returns:
        The files sorted by (folder, the timestamp in the name, name).
    """
    root = Path(folder)
    if root.is_file():
        return [root] if _EVENT_FILE_RE.match(root.name) else []
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if _EVENT_FILE_RE.match(name):
                p = Path(dirpath) / name
                if p.is_file():
                    found.append(p)
    found.sort(key=_file_key)
    return found


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


_VECTOR_FRAMING_MIN = 1 << 16
_MAX_PAIR_TABLES = 32
_CHUNK_RECORDS = 1 << 17
_HEADER_TABLE: list[U32] = []


def _header_crc_table() -> U32:
    """Masked CRC of the 8-byte header of every record length below 65536."""
    if not _HEADER_TABLE:
        lens = np.arange(65536, dtype=np.uint64)
        rows = lens.view(np.uint8).reshape(-1, 8).copy()
        rows[:, :4] ^= np.uint8(0xFF)
        _HEADER_TABLE.append(_mask_np(_VCRC.rows(rows) ^ np.uint32(0xFFFFFFFF)))
    return _HEADER_TABLE[0]


def _frame_loop(mm: mmap.mmap | bytes, off: int, size: int, limit: int = -1) -> tuple[I64, int]:
    """Follow record lengths from ``off``; returns the starts and where reading stopped."""
    offs: list[int] = []
    app = offs.append
    unpack = _U64.unpack_from
    stop = size - 16
    while off <= stop and limit != 0:
        ln = unpack(mm, off)[0]
        if ln > stop - off:
            break
        app(off)
        off += ln + 16
        limit -= 1
    return np.fromiter(offs, dtype=np.int64, count=len(offs)), off


def _frame_vectorized(mm: mmap.mmap | bytes, size: int) -> tuple[I64, int]:
    """Framing without a per-record Python loop.

    Candidate record starts are the positions whose data begins with the ``wall_time`` field tag
    (0x09), whose length is below 65536 and whose header checksum matches. Following the lengths
    from offset 0 through that candidate set is then a vectorized comparison; records that are not
    candidates (longer records, events without a wall time) and false candidates inside other
    records are resolved by a short Python walk.
    """
    arr: U8 = np.frombuffer(mm, dtype=np.uint8)
    # record start p where data byte p + 12 is 0x09; scanned in chunks so that temporary memory
    # stays proportional to the number of records, not to the file size
    hits: list[I64] = []
    step = 1 << 22
    for lo in range(0, size - 15, step):
        hi = min(lo + step, size - 15)
        hits.append(np.flatnonzero(arr[lo + 12 : hi + 12] == 0x09) + lo)
    q = np.concatenate(hits) if hits else np.zeros(0, dtype=np.int64)
    del arr
    buf = Buf(np.frombuffer(mm, dtype=np.uint8))
    lens = buf.rows(q, 8).view("<u8").reshape(-1)
    ok = lens < 65536
    q, lens = q[ok], lens[ok].astype(np.int64)
    crcs = buf.u32(q + 8)
    ok = (_header_crc_table()[lens] == crcs) & (q + 16 + lens <= size)
    cand, nxt = q[ok], (q + 16 + lens)[ok]
    del q, lens, crcs, ok, buf
    ncand = int(cand.shape[0])
    if ncand == 0:
        return _frame_loop(mm, 0, size)
    bad_links = np.flatnonzero(nxt[:-1] != cand[1:])
    nbad = int(bad_links.shape[0])
    parts: list[I64] = []
    off = 0
    stop = size - 16
    cset: set[int] | None = None
    slow_steps = 0
    while True:
        i = int(np.searchsorted(cand, off))
        if i < ncand and int(cand[i]) == off:
            b = int(np.searchsorted(bad_links, i))
            j = int(bad_links[b]) if b < nbad else ncand - 1
            parts.append(cand[i : j + 1])
            off = int(nxt[j])
            continue
        # not a candidate: plain loop until we are back on a candidate
        run: list[int] = []
        while off <= stop:
            ln = _U64.unpack_from(mm, off)[0]
            if ln > stop - off:
                break
            run.append(off)
            off += ln + 16
            slow_steps += 1
            if cset is not None:
                if off in cset:
                    break
            elif slow_steps % 16 == 0:
                break
        if not run:
            break
        parts.append(np.array(run, dtype=np.int64))
        if cset is None and slow_steps > 64:
            cset = set(cand.tolist())
    starts = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return starts, off


class _Reader:
    def __init__(self, path: str, check_crc: bool) -> None:
        self.path = path
        self.check_crc = check_crc
        self.out = EventFileData(path=path)
        self._warn_counts: dict[str, int] = {}
        self._tail_off = 0

    # -- warnings ------------------------------------------------------------------------------

    def warn(self, kind: str, msg: str) -> None:
        n = self._warn_counts.get(kind, 0) + 1
        self._warn_counts[kind] = n
        if n <= _MAX_WARNINGS_PER_KIND:
            self.out.warnings.append(f"{self.path}: {msg}")

    def finish_warnings(self) -> None:
        for kind, n in self._warn_counts.items():
            if n > _MAX_WARNINGS_PER_KIND:
                self.out.warnings.append(
                    f"{self.path}: ... and {n - _MAX_WARNINGS_PER_KIND} more {kind} problems "
                    "not listed"
                )

    # -- framing ------------------------------------------------------------------------------

    def frame(self, mm: mmap.mmap | bytes, size: int) -> I64:
        """Offsets of every complete record (where the tail starts goes to ``_tail_off``)."""
        if size < 12:
            raise MalformedRunError(
                self.path,
                f"{size} bytes: too short for a record header, not a TensorBoard event file",
            )
        _, c0 = _HEADER.unpack_from(mm, 0)
        if _mask(_crc32c(mm[0:8])) != c0:
            raise MalformedRunError(
                self.path, "first record header has a bad checksum: not a TensorBoard event file"
            )
        if size >= _VECTOR_FRAMING_MIN and mm is not None:
            starts, off = _frame_vectorized(mm, size)
        else:
            starts, off = _frame_loop(mm, 0, size)
        self._tail_off = off
        return starts

    # -- main ---------------------------------------------------------------------------------

    def read(self) -> EventFileData:
        path = self.path
        try:
            fh = open(path, "rb")  # noqa: SIM115, PTH123 - closed below
        except OSError as exc:
            raise MalformedRunError(path, f"cannot open: {exc.strerror or exc}") from exc
        with fh:
            try:
                size = os.fstat(fh.fileno()).st_size
            except OSError as exc:  # pragma: no cover
                raise MalformedRunError(path, f"cannot stat: {exc}") from exc
            if size == 0:
                self.warn("empty", "empty file (0 bytes): no records")
                self.finish_warnings()
                return self.out
            try:
                mm: mmap.mmap | bytes = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # pragma: no cover - e.g. special files
                mm = fh.read()
                size = len(mm)
            try:
                self._read_mapped(mm, size)
            finally:
                if isinstance(mm, mmap.mmap):
                    with contextlib.suppress(BufferError):  # a numpy view is still alive
                        mm.close()
        self.finish_warnings()
        return self.out

    def _read_mapped(self, mm: mmap.mmap | bytes, size: int) -> None:
        tell(self.path, "decoding", 0, size)
        arr: U8 = np.frombuffer(mm, dtype=np.uint8)
        buf = Buf(arr)
        starts = self.frame(mm, size)
        lens = np.zeros(starts.shape[0], dtype=np.int64)
        if starts.size:
            lens = buf.rows(starts, 8).view("<u8").reshape(-1).astype(np.int64)
        keep_to = starts.shape[0]
        if self.check_crc and starts.size:
            # every header: masked crc32c of the 8 length bytes, computed once per distinct length
            stored = buf.u32(starts + 8)
            expected = self._header_crcs(lens)
            bad = np.flatnonzero(stored != expected)
            if bad.size:
                keep_to = int(bad[0])
                off = int(starts[keep_to])
                self.warn(
                    "framing",
                    f"corrupt record header at byte offset {off} (length checksum mismatch); "
                    f"ignoring the last {size - off} bytes",
                )
        if keep_to == starts.shape[0]:
            self._warn_tail(mm, size)
        starts = starts[:keep_to]
        lens = lens[:keep_to]
        ds = starts + 12
        if self.check_crc and ds.size:
            stored = buf.u32(ds + lens)
            got = self._data_crcs(arr, ds, lens)
            bad = np.flatnonzero(stored != got)
            if bad.size:
                for i in bad.tolist():
                    self.warn(
                        "checksum",
                        f"record at byte offset {int(starts[i])} has a data checksum "
                        "mismatch; skipped",
                    )
                good = np.ones(ds.shape[0], dtype=np.bool_)
                good[bad] = False
                starts, ds, lens = starts[good], ds[good], lens[good]
        _Decoder(self, buf, mm, starts, ds, lens).run()

    def _header_crcs(self, lens: I64) -> U32:
        small = lens < 65536
        table = _header_crc_table()
        if small.all():
            out: U32 = table[lens]
            return out
        out = np.zeros(lens.shape[0], dtype=np.uint32)
        out[small] = table[lens[small]]
        for i in np.flatnonzero(~small).tolist():
            out[i] = _mask(_crc32c(_U64.pack(int(lens[i]))))
        return out

    def _data_crcs(self, arr: U8, ds: I64, lens: I64) -> U32:
        # Vectorized numpy CRC for the many short records (faster than one crc32c call per
        # record); long records use the crc32c package when it is installed.
        return _mask_np(_VCRC.many(arr, ds, lens))

    def _warn_tail(self, mm: mmap.mmap | bytes, size: int) -> None:
        off = self._tail_off
        left = size - off
        if left <= 0:
            return
        if left < 12:
            self.warn(
                "framing",
                f"truncated record header at byte offset {off} ({left} bytes left); ignored",
            )
            return
        ln, crc = _HEADER.unpack_from(mm, off)
        if _mask(_crc32c(mm[off : off + 8])) == crc:
            self.warn(
                "framing",
                f"truncated last record at byte offset {off}: its header announces {ln} data "
                f"bytes but only {max(left - 12, 0)} of the {ln + 4} data+checksum bytes are "
                "present (the writer probably crashed); ignored",
            )
        else:
            self.warn(
                "framing",
                f"unreadable bytes at byte offset {off} (not a valid record header); ignoring "
                f"the last {left} bytes",
            )


class _Decoder:
    """Bulk protobuf wire-format decoding of the framed records."""

    def __init__(
        self, rd: _Reader, buf: Buf, mm: mmap.mmap | bytes, starts: I64, ds: I64, lens: I64
    ) -> None:
        self.rd = rd
        self.buf = buf
        self.mm = mm
        self.starts = starts
        self.ds = ds
        self.de = ds + lens
        self.nrec = int(ds.shape[0])
        self.fallback = np.zeros(self.nrec, dtype=np.bool_)

    def run(self) -> None:
        # in chunks of records, so that temporaries stay bounded on large files
        parts: list[dict[str, Any]] = []
        walls: list[F64] = []
        steps: list[I64] = []
        size = len(self.mm)
        for r0 in range(0, max(self.nrec, 1), _CHUNK_RECORDS):
            r1 = min(r0 + _CHUNK_RECORDS, self.nrec)
            if r0:
                tell(self.rd.path, "decoding", int(self.starts[r0]), size)
            rec, vs, ve, wall_c, step_c = self._events(r0, r1)
            part = self._values(rec, vs, ve)
            # drop values of records that go through protobuf
            keep = ~self.fallback[part["rec"]]
            parts.append({k: v[keep] for k, v in part.items()})
            walls.append(wall_c)
            steps.append(step_c)
        if len(parts) == 1:
            cols, wall, step = parts[0], walls[0], steps[0]
        else:
            cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
            wall, step = np.concatenate(walls), np.concatenate(steps)
        del parts, walls, steps
        fb = _Fallback(self)
        fb.decode(np.flatnonzero(self.fallback))
        self._assemble(cols, wall, step, fb)

    # -- event level ----------------------------------------------------------------------------

    def _events(self, r0: int, r1: int) -> tuple[I64, I64, I64, F64, I64]:
        """Parse records r0..r1-1; returns their values' (record, start, end), wall, step."""
        buf, n = self.buf, r1 - r0
        cur = self.ds[r0:r1].copy()
        end = self.de[r0:r1]
        fallback = self.fallback[r0:r1]  # a view: writes go to self.fallback
        wall = np.zeros(n, dtype=np.float64)
        step = np.zeros(n, dtype=np.int64)
        s_start = np.full(n, -1, dtype=np.int64)
        s_end = np.full(n, -1, dtype=np.int64)
        act = np.flatnonzero(cur < end)
        for _ in range(_MAX_FIELDS):
            if act.size == 0:
                break
            c = cur[act]
            t = buf.u8(c)
            newc = np.full(act.shape[0], -1, dtype=np.int64)
            m = _sel(t == 0x09)
            if m is not None:
                idx = act[m]
                p = c[m] + 1
                ok = p + 8 <= end[idx]
                wall[idx[ok]] = buf.f64(p[ok])
                newc[m] = np.where(ok, p + 8, -1)
            m = _sel(t == 0x10)
            if m is not None:
                idx = act[m]
                v, ln, ok = buf.varint(c[m] + 1, end[idx])
                step[idx] = v.view(np.int64)
                newc[m] = np.where(ok, c[m] + 1 + ln, -1)
            m = _sel(t == 0x2A)
            if m is not None:
                idx = act[m]
                v, ln, ok = buf.varint(c[m] + 1, end[idx])
                ss = c[m] + 1 + ln
                se = ss + v.astype(np.int64)
                ok &= (se <= end[idx]) & (v < np.uint64(1 << 40)) & (s_start[idx] < 0)
                s_start[idx] = ss
                s_end[idx] = se
                newc[m] = np.where(ok, se, -1)
            bad = newc < 0
            if bad.any():
                fallback[act[bad]] = True
            cur[act] = newc
            act = act[(~bad) & (newc < end[act])]
        if act.size:
            fallback[act] = True
        # summaries -> values
        has = np.flatnonzero((s_start >= 0) & ~fallback)
        recs: list[I64] = []
        v_s: list[I64] = []
        v_e: list[I64] = []
        scur = s_start[has]
        send = s_end[has]
        act_i = np.flatnonzero(scur < send)
        for _ in range(_MAX_VALUES_PER_SUMMARY):
            if act_i.size == 0:
                break
            c = scur[act_i]
            idx = has[act_i]
            t = buf.u8(c)
            v, ln, ok = buf.varint(c + 1, send[act_i])
            vs = c + 1 + ln
            ve = vs + v.astype(np.int64)
            ok &= (t == 0x0A) & (ve <= send[act_i]) & (v < np.uint64(1 << 40))
            if not ok.all():
                fallback[idx[~ok]] = True
            recs.append(idx[ok])
            v_s.append(vs[ok])
            v_e.append(ve[ok])
            scur[act_i] = np.where(ok, ve, send[act_i])
            act_i = act_i[ok & (ve < send[act_i])]
        if act_i.size:
            fallback[has[act_i]] = True
        if len(recs) == 1:
            rec, vs_a, ve_a = recs[0], v_s[0], v_e[0]
        elif recs:
            rec = np.concatenate(recs)
            vs_a = np.concatenate(v_s)
            ve_a = np.concatenate(v_e)
            order = np.argsort(rec, kind="stable")
            rec, vs_a, ve_a = rec[order], vs_a[order], ve_a[order]
        else:
            rec = vs_a = ve_a = np.zeros(0, dtype=np.int64)
        return rec + r0, vs_a, ve_a, wall, step

    # -- value level ----------------------------------------------------------------------------

    def _values(self, rec: I64, vs: I64, ve: I64) -> dict[str, Any]:
        buf = self.buf
        k = rec.shape[0]
        kind = np.zeros(k, dtype=np.int8)
        tag_s = np.full(k, -1, dtype=np.int64)
        tag_n = np.zeros(k, dtype=np.int64)
        meta_s = np.full(k, -1, dtype=np.int64)
        meta_e = np.full(k, -1, dtype=np.int64)
        ten_s = np.full(k, -1, dtype=np.int64)
        ten_e = np.full(k, -1, dtype=np.int64)
        value = np.zeros(k, dtype=np.float64)
        cur = vs.copy()
        bad_v = np.zeros(k, dtype=np.bool_)
        act = np.flatnonzero(cur < ve)
        for _ in range(_MAX_FIELDS):
            if act.size == 0:
                break
            c = cur[act]
            lim = ve[act]
            t = buf.u8(c)
            newc = np.full(act.shape[0], -1, dtype=np.int64)
            m = _sel(t == 0x15)  # simple_value, fixed32
            if m is not None:
                idx = act[m]
                p = c[m] + 1
                ok = p + 4 <= lim[m]
                value[idx[ok]] = buf.f32(p[ok])
                kind[idx] = _K_SIMPLE
                newc[m] = np.where(ok, p + 4, -1)
            # length-delimited fields: tag(1) metadata(9) tensor(8) node_name(7) and the
            # non-scalar summaries old histogram(3) image(4) histo(5) audio(6)
            m = _sel(
                (t == 0x0A)
                | (t == 0x4A)
                | (t == 0x42)
                | (t == 0x3A)
                | (t == 0x1A)
                | (t == 0x22)
                | (t == 0x2A)
                | (t == 0x32)
            )
            if m is not None:
                idx = act[m]
                tm = t[m]
                v, ln, ok = buf.varint(c[m] + 1, lim[m])
                s = c[m] + 1 + ln
                e = s + v.astype(np.int64)
                ok &= (e <= lim[m]) & (v < np.uint64(1 << 40))
                mm_ = tm == 0x0A
                tag_s[idx[mm_]] = s[mm_]
                tag_n[idx[mm_]] = (e - s)[mm_]
                mm_ = tm == 0x4A
                if mm_.any():
                    ok &= ~(mm_ & (meta_s[idx] >= 0))  # repeated metadata merges: protobuf
                    meta_s[idx[mm_]] = s[mm_]
                    meta_e[idx[mm_]] = e[mm_]
                mm_ = tm == 0x42
                if mm_.any():
                    ok &= ~(mm_ & (ten_s[idx] >= 0))
                    ten_s[idx[mm_]] = s[mm_]
                    ten_e[idx[mm_]] = e[mm_]
                    kind[idx[mm_]] = _K_TENSOR
                mm_ = (tm == 0x1A) | (tm == 0x22) | (tm == 0x2A) | (tm == 0x32)
                kind[idx[mm_]] = _K_SKIP
                newc[m] = np.where(ok, e, -1)
            bad = newc < 0
            if bad.any():
                bad_v[act[bad]] = True
            cur[act] = newc
            act = act[(~bad) & (newc < ve[act])]
        if act.size:
            bad_v[act] = True
        # a tensor in the oneof that was then replaced by another value kind is not a tensor
        is_t = kind == _K_TENSOR
        ten_s[~is_t] = -1
        if is_t.any():
            ti = np.flatnonzero(is_t)
            tv, t_ok = self._tensors(ten_s[ti], ten_e[ti])
            value[ti] = tv
            # t_ok: 1 scalar decoded, 0 not a scalar (skip), -1 needs protobuf
            kind[ti[t_ok == 0]] = _K_SKIP
            bad_v[ti[t_ok < 0]] = True
        bad_v |= tag_s < 0
        if bad_v.any():
            self.fallback[rec[bad_v]] = True
        return {
            "rec": rec,
            "kind": kind,
            "tag_s": tag_s,
            "tag_n": tag_n,
            "meta_s": meta_s,
            "meta_e": meta_e,
            "value": value,
        }

    def _tensors(self, ts: I64, te: I64) -> tuple[F64, npt.NDArray[np.int8]]:
        """Decode scalar DT_FLOAT/DT_DOUBLE tensors; others are skipped or left to protobuf."""
        buf = self.buf
        k = ts.shape[0]
        dtype = np.zeros(k, dtype=np.int64)
        nonscalar = np.zeros(k, dtype=np.bool_)
        val_pos = np.full(k, -1, dtype=np.int64)  # position of the value bytes
        val_w = np.zeros(k, dtype=np.int64)  # 4 float32, 8 float64, other: count of bytes
        val_field = np.zeros(k, dtype=np.int64)  # which field held it: 1 val, 2 content
        nvals = np.zeros(k, dtype=np.int64)
        unknown = np.zeros(k, dtype=np.bool_)
        cur = ts.copy()
        act = np.flatnonzero(cur < te)
        for _ in range(_MAX_FIELDS):
            if act.size == 0:
                break
            c = cur[act]
            lim = te[act]
            t = buf.u8(c)
            newc = np.full(act.shape[0], -1, dtype=np.int64)
            m = _sel((t == 0x08) | (t == 0x18))  # dtype, version_number
            if m is not None:
                idx = act[m]
                v, ln, ok = buf.varint(c[m] + 1, lim[m])
                dm = t[m] == 0x08
                dtype[idx[dm]] = v[dm].view(np.int64)
                newc[m] = np.where(ok, c[m] + 1 + ln, -1)
            m = _sel(
                (t == 0x12) | (t == 0x22) | (t == 0x2A) | (t == 0x32)
            )  # shape, content, packed f/d
            if m is not None:
                idx = act[m]
                tm = t[m]
                v, ln, ok = buf.varint(c[m] + 1, lim[m])
                s = c[m] + 1 + ln
                e = s + v.astype(np.int64)
                ok &= (e <= lim[m]) & (v < np.uint64(1 << 40))
                sh = tm == 0x12
                nonscalar[idx[sh & (e > s)]] = True
                for code, fid, width in ((0x22, 2, 0), (0x2A, 1, 4), (0x32, 1, 8)):
                    sel = tm == code
                    if sel.any():
                        ii = idx[sel]
                        val_pos[ii] = s[sel]
                        val_w[ii] = (e - s)[sel] if width == 0 else width
                        val_field[ii] = fid
                        nvals[ii] += (e - s)[sel]
                newc[m] = np.where(ok, e, -1)
            m = _sel((t == 0x2D) | (t == 0x31))  # unpacked float_val / double_val
            if m is not None:
                idx = act[m]
                wid = np.where(t[m] == 0x2D, 4, 8)
                p = c[m] + 1
                ok = p + wid <= lim[m]
                val_pos[idx] = p
                val_w[idx] = wid
                val_field[idx] = 1
                nvals[idx] += wid
                newc[m] = np.where(ok, p + wid, -1)
            known = (
                (t == 0x08)
                | (t == 0x18)
                | (t == 0x12)
                | (t == 0x22)
                | (t == 0x2A)
                | (t == 0x32)
                | (t == 0x2D)
                | (t == 0x31)
            )
            unknown[act[~known]] = True
            newc[~known] = -1
            bad = newc < 0
            cur[act] = newc
            act = act[(~bad) & (newc < te[act])]
        unknown[act] = True
        # decide
        out = np.zeros(k, dtype=np.float64)
        res = np.full(k, -1, dtype=np.int8)
        res[nonscalar & ~unknown] = 0  # a shaped tensor (histogram, image, ...): skip
        f32 = (~nonscalar) & (~unknown) & (dtype == _DT_FLOAT) & (val_w == 4) & (nvals == 4)
        f64 = (~nonscalar) & (~unknown) & (dtype == _DT_DOUBLE) & (val_w == 8) & (nvals == 8)
        if f32.any():
            out[f32] = buf.f32(val_pos[f32])
            res[f32] = 1
        if f64.any():
            out[f64] = buf.f64(val_pos[f64])
            res[f64] = 1
        # a scalar tensor without values is the dtype's zero
        empty = (
            (~nonscalar)
            & (~unknown)
            & (val_field == 0)
            & ((dtype == _DT_FLOAT) | (dtype == _DT_DOUBLE))
        )
        out[empty] = 0.0
        res[empty] = 1
        # non-numeric dtype with only known fields (e.g. DT_INVALID): not a scalar
        nonnum = (~unknown) & (~nonscalar) & (dtype != _DT_FLOAT) & (dtype != _DT_DOUBLE)
        nonnum &= ~np.isin(dtype, np.array([*_CONTENT_DTYPES, _DT_BFLOAT16], dtype=np.int64))
        res[nonnum] = 0
        return out, res

    # -- assembling -----------------------------------------------------------------------------

    def _tag_ids(self, tag_s: I64, tag_n: I64, names: list[str], index: dict[bytes, int]) -> I64:
        """Map every tag span to an id (names/index are extended in place)."""
        buf = self.buf
        k = tag_s.shape[0]
        ids = np.zeros(k, dtype=np.int64)
        if k == 0:
            return ids
        lens = np.unique(tag_n)
        for ln in lens.tolist():
            sel = np.flatnonzero(tag_n == ln)
            if ln == 0:
                ids[sel] = self._tag_id(b"", names, index)
                continue
            rows = buf.rows(tag_s[sel], ln)
            w = -(-ln // 8) * 8
            if w != ln:
                rows_p = np.zeros((rows.shape[0], w), dtype=np.uint8)
                rows_p[:, :ln] = rows
            else:
                rows_p = np.ascontiguousarray(rows)
            words = rows_p.view("<u8")
            h = np.full(rows.shape[0], np.uint64(ln), dtype=np.uint64)
            for j in range(words.shape[1]):
                h = (h ^ words[:, j]) * np.uint64(0x9E3779B97F4A7C15)
                h ^= h >> np.uint64(29)
            uh, first, inv = _unique_small(h)
            rep = rows_p[first]
            if not bool((rows_p == rep[inv]).all()):  # pragma: no cover - 64-bit hash collision
                for i, r in zip(sel.tolist(), rows.tolist(), strict=True):
                    ids[i] = self._tag_id(bytes(r), names, index)
                continue
            uid = np.array(
                [self._tag_id(bytes(rep[i, :ln]), names, index) for i in range(uh.shape[0])],
                dtype=np.int64,
            )
            ids[sel] = uid[inv]
        return ids

    @staticmethod
    def _tag_id(raw: bytes, names: list[str], index: dict[bytes, int]) -> int:
        i = index.get(raw)
        if i is None:
            i = index[raw] = len(names)
            names.append(raw.decode("utf-8", errors="replace"))
        return i

    def _assemble(self, cols: dict[str, Any], wall: F64, step: I64, fb: _Fallback) -> None:
        out = self.rd.out
        names: list[str] = []
        index: dict[bytes, int] = {}
        tag_id = self._tag_ids(cols["tag_s"], cols["tag_n"], names, index)
        rec: I64 = cols["rec"]
        kind = cols["kind"]
        nv = rec.shape[0]
        # position of each value inside its record (for ordering with protobuf-decoded ones)
        sub = np.zeros(nv, dtype=np.int64)
        if nv > 1:
            newrec = np.empty(nv, dtype=np.bool_)
            newrec[0] = True
            np.not_equal(rec[1:], rec[:-1], out=newrec[1:])
            first_pos = np.flatnonzero(newrec)
            run = np.cumsum(newrec) - 1
            sub = np.arange(nv, dtype=np.int64) - first_pos[run]
        # plugin of each tag: the first metadata seen for it (in file order)
        meta_first: dict[int, tuple[int, int, bytes]] = {}
        has_meta = np.flatnonzero(cols["meta_s"] >= 0)
        if has_meta.size:
            _, firsts = np.unique(tag_id[has_meta], return_index=True)
            for j in has_meta[firsts].tolist():
                ms, me = int(cols["meta_s"][j]), int(cols["meta_e"][j])
                meta_first[int(tag_id[j])] = (int(rec[j]), int(sub[j]), bytes(self.mm[ms:me]))
        for r, s, tag, mbytes in fb.metas:
            tid = self._tag_id(tag.encode("utf-8"), names, index)
            prev = meta_first.get(tid)
            if prev is None or (r, s) < prev[:2]:
                meta_first[tid] = (r, s, mbytes)
        plugins = {tid: self._plugin(names[tid], m) for tid, (_, _, m) in meta_first.items()}
        # text summaries: those of text-plugin tags, in file order, last wins
        for _, _, tag, text in sorted(fb.texts, key=lambda x: (x[0], x[1])):
            text_id = index.get(tag.encode("utf-8"))
            if text_id is not None and plugins.get(text_id) == "text":
                out.texts[tag] = text
        # scalars
        is_scalar = kind == _K_SIMPLE
        tens = kind == _K_TENSOR
        if tens.any():
            ok_plugin = np.ones(len(names), dtype=np.bool_)
            for tid, pl in plugins.items():
                ok_plugin[tid] = pl in _SCALAR_PLUGINS
            is_scalar |= tens & ok_plugin[tag_id]
        sel = np.flatnonzero(is_scalar)
        s_rec = rec[sel]
        s_sub = sub[sel]
        s_tag = tag_id[sel]
        s_val = cols["value"][sel]
        if fb.scalars:
            f_rec = np.array([x[0] for x in fb.scalars], dtype=np.int64)
            f_sub = np.array([x[1] for x in fb.scalars], dtype=np.int64)
            f_tag = np.array(
                [self._tag_id(x[2].encode("utf-8"), names, index) for x in fb.scalars],
                dtype=np.int64,
            )
            f_val = np.array([x[3] for x in fb.scalars], dtype=np.float64)
            f_ok = np.array(
                [
                    x[4] or plugins.get(int(t), "") in _SCALAR_PLUGINS
                    for x, t in zip(fb.scalars, f_tag, strict=True)
                ],
                dtype=np.bool_,
            )
            s_rec = np.concatenate([s_rec, f_rec[f_ok]])
            s_sub = np.concatenate([s_sub, f_sub[f_ok]])
            s_tag = np.concatenate([s_tag, f_tag[f_ok]])
            s_val = np.concatenate([s_val, f_val[f_ok]])
            order = np.lexsort((s_sub, s_rec))
            s_rec, s_tag, s_val = s_rec[order], s_tag[order], s_val[order]
        if s_rec.size == 0:
            return
        # one column per tag, tags in order of first appearance in the file
        ntags = len(names)
        if ntags <= 64:
            present = np.flatnonzero(np.bincount(s_tag, minlength=ntags))
            members = [np.flatnonzero(s_tag == t) for t in present.tolist()]
        else:
            order = np.argsort(s_tag, kind="stable")
            cuts = np.flatnonzero(np.diff(s_tag[order])) + 1
            members = np.split(order, cuts)
        members.sort(key=lambda ix: int(ix[0]))  # s_* are in file order
        for ix in members:
            recs = s_rec[ix]
            out.scalars[names[int(s_tag[ix[0]])]] = ScalarColumn(
                steps=step[recs], values=s_val[ix], wall_times=wall[recs]
            )
        # hparams (plugin data content of the session_start_info tag)
        for tid, (_, _, m) in meta_first.items():
            if plugins.get(tid) == "hparams":
                out.hparams.update(_parse_hparams(m))

    @staticmethod
    def _plugin(tag: str, meta: bytes) -> str:
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto.summary_pb2 import SummaryMetadata

        try:
            md = SummaryMetadata.FromString(meta)
        except (DecodeError, ValueError, RuntimeError):
            return ""
        return str(md.plugin_data.plugin_name)


def _unique_small(h: U64) -> tuple[U64, I64, I64]:
    """``np.unique(h, return_index=True, return_inverse=True)``, fast when few values repeat."""
    probe = np.unique(h[:4096])
    pos = np.minimum(np.searchsorted(probe, h), probe.shape[0] - 1)
    if bool((probe[pos] == h).all()):
        found = np.zeros(probe.shape[0], dtype=np.bool_)
        found[pos] = True
        if not found.all():  # keep only values that occur
            keep = np.flatnonzero(found)
            remap = np.cumsum(found) - 1
            probe, pos = probe[keep], remap[pos]
        first = np.full(probe.shape[0], h.shape[0], dtype=np.int64)
        np.minimum.at(first, pos, np.arange(h.shape[0], dtype=np.int64))
        return probe, first, pos.astype(np.int64)
    uh, first_u, inv = np.unique(h, return_index=True, return_inverse=True)
    return uh, first_u.astype(np.int64), inv.astype(np.int64).reshape(-1)


def _sel(mask: B1) -> B1 | slice | None:
    """None if no element is selected, a full slice if all are (no copies), else the mask."""
    if not mask.any():
        return None
    if mask.all():
        return slice(None)
    return mask


def _parse_hparams(meta: bytes) -> dict[str, object]:
    """hparams from a serialized SummaryMetadata of the hparams plugin (session_start_info)."""
    from google.protobuf.message import DecodeError

    try:
        from tensorboard.compat.proto.summary_pb2 import SummaryMetadata
        from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

        md = SummaryMetadata.FromString(meta)
        pd = HParamsPluginData.FromString(md.plugin_data.content)
    except (DecodeError, ValueError, RuntimeError, ImportError):
        return {}
    if not pd.HasField("session_start_info"):
        return {}
    out: dict[str, object] = {}
    for key, v in pd.session_start_info.hparams.items():
        which = v.WhichOneof("kind")
        if which == "number_value":
            out[key] = float(v.number_value)
        elif which == "string_value":
            out[key] = str(v.string_value)
        elif which == "bool_value":
            out[key] = bool(v.bool_value)
        elif which is None or which == "null_value":
            out[key] = None
        else:
            from google.protobuf.json_format import MessageToDict

            out[key] = MessageToDict(v)
    return out


def _tensor_scalar(t: Any) -> float | None:
    """The value of a numeric scalar TensorProto (no dims), else None."""
    if len(t.tensor_shape.dim) or t.tensor_shape.unknown_rank:
        return None
    dt = int(t.dtype)
    fmt = _CONTENT_DTYPES.get(dt)
    if fmt is None and dt != _DT_BFLOAT16:
        return None
    if t.tensor_content:
        if dt == _DT_BFLOAT16:
            raw = bytes(t.tensor_content)[:2]
            if len(raw) < 2:
                return None
            return float(np.frombuffer(b"\x00\x00" + raw, dtype="<f4")[0])
        assert fmt is not None
        width = np.dtype(fmt).itemsize
        raw = bytes(t.tensor_content)
        if len(raw) < width:
            return None
        return float(np.frombuffer(raw[:width], dtype=fmt)[0])
    if dt == _DT_FLOAT:
        return float(t.float_val[0]) if len(t.float_val) else 0.0
    if dt == _DT_DOUBLE:
        return float(t.double_val[0]) if len(t.double_val) else 0.0
    if dt in (_DT_HALF, _DT_BFLOAT16):
        if not len(t.half_val):
            return 0.0
        bits = int(t.half_val[0]) & 0xFFFF
        if dt == _DT_HALF:
            return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])
        return float(np.array([bits << 16], dtype=np.uint32).view(np.float32)[0])
    if dt in (_DT_INT32, _DT_INT16, _DT_INT8, _DT_UINT8, _DT_UINT16):
        return float(t.int_val[0]) if len(t.int_val) else 0.0
    if dt == _DT_INT64:
        return float(t.int64_val[0]) if len(t.int64_val) else 0.0
    if dt == _DT_UINT32:
        return float(t.uint32_val[0]) if len(t.uint32_val) else 0.0
    if dt == _DT_UINT64:
        return float(t.uint64_val[0]) if len(t.uint64_val) else 0.0
    if dt == _DT_BOOL:
        return float(t.bool_val[0]) if len(t.bool_val) else 0.0
    return None


def _tensor_text(t: Any) -> str | None:
    if int(t.dtype) != _DT_STRING:
        return None
    parts = [bytes(s).decode("utf-8", errors="replace") for s in t.string_val]
    return "\n".join(parts)


class _Fallback:
    """Protobuf decoding of the records the bulk parser left alone."""

    def __init__(self, dec: _Decoder) -> None:
        self.dec = dec
        # (record, value index, tag, value, is_simple_value)
        self.scalars: list[tuple[int, int, str, float, bool]] = []
        self.metas: list[tuple[int, int, str, bytes]] = []
        self.texts: list[tuple[int, int, str, str]] = []

    def decode(self, recs: I64) -> None:
        if recs.size == 0:
            return
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto.event_pb2 import Event

        dec = self.dec
        rd = dec.rd
        mm = dec.mm
        for r in recs.tolist():
            s, e = int(dec.ds[r]), int(dec.de[r])
            try:
                ev = Event.FromString(mm[s:e])
            except (DecodeError, ValueError, RuntimeError, TypeError) as exc:
                if int(dec.starts[r]) == 0:
                    raise MalformedRunError(
                        rd.path,
                        f"first record is not a TensorBoard Event ({exc.__class__.__name__})",
                    ) from None
                rd.warn(
                    "decode",
                    f"record at byte offset {int(dec.starts[r])} is not a valid Event; skipped",
                )
                continue
            try:
                self._event(r, ev)
            except (ValueError, TypeError, RuntimeError, UnicodeDecodeError):  # pragma: no cover
                rd.warn(
                    "decode",
                    f"record at byte offset {int(dec.starts[r])} could not be read; skipped",
                )

    def _event(self, r: int, ev: Any) -> None:
        what = ev.WhichOneof("what")
        if what == "file_version":
            if self.dec.rd.out.file_version is None:
                self.dec.rd.out.file_version = str(ev.file_version)
            return
        if what != "summary":
            return
        for i, v in enumerate(ev.summary.value):
            tag = str(v.tag)
            if v.HasField("metadata"):
                self.metas.append((r, i, tag, v.metadata.SerializeToString()))
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                self.scalars.append((r, i, tag, float(v.simple_value), True))
            elif kind == "tensor":
                x = _tensor_scalar(v.tensor)
                if x is not None:
                    self.scalars.append((r, i, tag, x, False))
                    continue
                txt = _tensor_text(v.tensor)
                if txt is not None:
                    self.texts.append((r, i, tag, txt))


def read_event_file(
    path: str | os.PathLike[str], *, check_crc: bool = True, warn: bool = True
) -> EventFileData:
    """Read the scalars, texts and hparams of one TensorBoard event file.

    Damaged files are the common case (a crashed run leaves a truncated last record): every intact
    record is kept and each problem is reported in ``EventFileData.warnings`` (and emitted once as
    a :class:`~curvediag.errors.CurvediagWarning`), naming the file and the byte offset.

    Args:
        path: The event file.
        check_crc: Verify the masked CRC-32C of every record header and record (records whose
            data checksum fails are skipped; a bad header ends the readable part of the file).
            The first record's header checksum is always checked: it is how a file is recognized.
        warn: Also emit the problems as a :class:`~curvediag.errors.CurvediagWarning` (callers
            that pass ``EventFileData.warnings`` on themselves set this to False).

    Returns:
        The file's content.

    Raises:
        MalformedRunError: The file cannot be opened or is not an event file at all (its first
            record's framing is invalid or it does not decode as an Event).
    """
    rd = _Reader(os.fspath(path), check_crc)
    try:
        out = rd.read()
    except MalformedRunError:
        raise
    except (
        struct.error,
        ValueError,
        IndexError,
        OverflowError,
        UnicodeDecodeError,
    ) as exc:  # pragma: no cover
        raise MalformedRunError(
            rd.path, f"unreadable event file ({exc.__class__.__name__}: {exc})"
        ) from exc
    if out.warnings and warn:
        warnings.warn(
            "; ".join(out.warnings)
            if len(out.warnings) <= 3
            else f"{out.warnings[0]} (+{len(out.warnings) - 1} more)",
            CurvediagWarning,
            stacklevel=2,
        )
    return out
