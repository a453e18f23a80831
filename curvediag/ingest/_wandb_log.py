"""Dependency-free reader for W&B's binary transaction log (``run-<id>.wandb``).

Newer ``wandb`` releases (>= 0.17 or so) keep a run's metrics, config and summary only in
``run-<id>.wandb``; in offline mode there is no ``wandb-summary.json`` or ``config.yaml``. This
module reads that file without importing ``wandb`` or ``protobuf``.

File layout::

    header   7 bytes: b":W&B", uint16 0xBEE1 (little endian), uint8 version (0)
    blocks   32 KiB blocks (counted from file offset 0, the header is part of block 0) of
             LevelDB-log-style records: header ``<IHB`` = (crc, length, type), then ``length``
             bytes. Types FULL=1, FIRST=2, MIDDLE=3, LAST=4 (FIRST, MIDDLE..., LAST are joined).
             A block tail shorter than 7 bytes is zero padding. ``crc`` is the ordinary zlib
             CRC-32 of ``bytes([type]) + data``.

Each joined payload is a serialized ``wandb_internal.Record`` protobuf message. Only the few
fields needed are decoded (field numbers below, taken from ``wandb/proto/wandb_internal.proto``
of wandb 0.31, unchanged since at least 0.15); everything else is skipped by wire type.

Damaged files (a crashed run usually leaves a truncated last record) keep every record before
the damage; problems are reported as warnings naming the file and the byte offset, and
reading resumes at the next 32 KiB block when possible.
"""

from __future__ import annotations

import json
import os
import struct
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from curvediag.errors import CurvediagWarning, MalformedRunError
from curvediag.ingest import _progress
from curvediag.ingest._progress import listening, read_chunked, tell
from curvediag.ingest._protowire import FIXED64 as _FIXED64
from curvediag.ingest._protowire import LEN as _LEN
from curvediag.ingest._protowire import VARINT as _VARINT
from curvediag.ingest._protowire import DecodeError as _DecodeError
from curvediag.ingest._protowire import fields as _fields
from curvediag.ingest._protowire import signed as _signed
from curvediag.ingest._protowire import skip as _skip
from curvediag.ingest._protowire import skip_field as _skip_field
from curvediag.ingest._protowire import text as _text
from curvediag.ingest._protowire import varint as _varint

__all__ = ["WandbLog", "read_wandb_log"]

# --------------------------------------------------------------------------------------------
# Framing constants
# --------------------------------------------------------------------------------------------
MAGIC: Final = b":W&B"
IDENT: Final = 0xBEE1
VERSION: Final = 0
FILE_HEADER_SIZE: Final = 7
BLOCK_SIZE: Final = 32 * 1024
RECORD_HEADER_SIZE: Final = 7
FULL: Final = 1
FIRST: Final = 2
MIDDLE: Final = 3
LAST: Final = 4

# --------------------------------------------------------------------------------------------
# Protobuf field numbers (wandb/proto/wandb_internal.proto, wandb 0.31)
# --------------------------------------------------------------------------------------------
# message Record (oneof record_type; other members: output, files, stats, artifact, ...)
RECORD_HISTORY: Final = 2  # HistoryRecord history
RECORD_SUMMARY: Final = 3  # SummaryRecord summary
RECORD_CONFIG: Final = 5  # ConfigRecord config
RECORD_RUN: Final = 17  # RunRecord run
RECORD_EXIT: Final = 18  # RunExitRecord exit
RECORD_FINAL: Final = 20  # FinalRecord final (written on a clean finish)
RECORD_HEADER: Final = 21  # HeaderRecord header

RECORD_NUM: Final = 1  # int64 num
RECORD_CONTROL: Final = 16  # Control control (not part of the oneof)
RECORD_UUID: Final = 19  # string uuid (not part of the oneof)
RECORD_INFO: Final = 200  # _RecordInfo _info (not part of the oneof)

# message HistoryRecord
HISTORY_ITEM: Final = 1  # repeated HistoryItem item
HISTORY_STEP: Final = 2  # HistoryStep step
# message HistoryStep
HISTORY_STEP_NUM: Final = 1  # int64 num

# message HistoryItem / ConfigItem / SummaryItem (the three share these numbers)
ITEM_KEY: Final = 1  # string key
ITEM_NESTED_KEY: Final = 2  # repeated string nested_key
ITEM_VALUE_JSON: Final = 16  # string value_json
# HistoryItem oneof value (declared in the proto, not written by any known wandb version)
HISTORY_ITEM_NONE: Final = 3  # bool none
HISTORY_ITEM_BOOLEAN: Final = 4  # bool boolean
HISTORY_ITEM_INTEGER: Final = 5  # sint64 integer
HISTORY_ITEM_NUMBER: Final = 6  # double number
HISTORY_ITEM_TEXT: Final = 7  # string text
HISTORY_ITEM_JSON: Final = 8  # string json

# message ConfigRecord / SummaryRecord
UPDATE: Final = 1  # repeated ConfigItem/SummaryItem update
REMOVE: Final = 2  # repeated ConfigItem/SummaryItem remove

# message RunRecord
RUN_ID: Final = 1  # string run_id
RUN_ENTITY: Final = 2  # string entity
RUN_PROJECT: Final = 3  # string project
RUN_CONFIG: Final = 4  # ConfigRecord config
RUN_SUMMARY: Final = 5  # SummaryRecord summary
RUN_GROUP: Final = 6  # string run_group
RUN_JOB_TYPE: Final = 7  # string job_type
RUN_DISPLAY_NAME: Final = 8  # string display_name
RUN_NOTES: Final = 9  # string notes
RUN_TAGS: Final = 10  # repeated string tags
RUN_SWEEP_ID: Final = 12  # string sweep_id
RUN_HOST: Final = 13  # string host
RUN_STARTING_STEP: Final = 14  # int64 starting_step
RUN_STORAGE_ID: Final = 16  # string storage_id
RUN_START_TIME: Final = 17  # google.protobuf.Timestamp start_time
RUN_RESUMED: Final = 18  # bool resumed
RUN_TELEMETRY: Final = 19  # TelemetryRecord telemetry
RUN_RUNTIME: Final = 20  # int32 runtime
RUN_GIT: Final = 21  # GitRepoRecord git
RUN_FORKED: Final = 22  # bool forked
RUN_RESUME: Final = 24  # bool resume
# message google.protobuf.Timestamp
TIMESTAMP_SECONDS: Final = 1  # int64 seconds
TIMESTAMP_NANOS: Final = 2  # int32 nanos
# message TelemetryRecord (wandb_telemetry.proto)
TELEMETRY_PYTHON_VERSION: Final = 4  # string python_version
TELEMETRY_CLI_VERSION: Final = 5  # string cli_version
TELEMETRY_HUGGINGFACE_VERSION: Final = 6  # string huggingface_version
# message GitRepoRecord
GIT_REMOTE_URL: Final = 1  # string remote_url
GIT_COMMIT: Final = 2  # string commit
# message RunExitRecord
EXIT_CODE: Final = 1  # int32 exit_code
EXIT_RUNTIME: Final = 2  # int32 runtime
# message HeaderRecord / VersionInfo
HEADER_VERSION_INFO: Final = 1  # VersionInfo version_info
VERSION_INFO_PRODUCER: Final = 1  # string producer

# Single-byte tags of the hot path
_TAG_HISTORY_ITEM: Final = (HISTORY_ITEM << 3) | _LEN  # 0x0a
_TAG_HISTORY_STEP: Final = (HISTORY_STEP << 3) | _LEN  # 0x12
_TAG_STEP_NUM: Final = (HISTORY_STEP_NUM << 3) | _VARINT  # 0x08
_TAG_UPDATE: Final = (UPDATE << 3) | _LEN  # 0x0a
_TAG_REMOVE: Final = (REMOVE << 3) | _LEN  # 0x12, same tag as HistoryRecord.step
_TAG_ITEM_KEY: Final = (ITEM_KEY << 3) | _LEN  # 0x0a
_TAG_ITEM_NESTED_KEY: Final = (ITEM_NESTED_KEY << 3) | _LEN  # 0x12
# value_json (field 16, wire type 2) has the two-byte tag 0x82 0x01
_TAG_VALUE_JSON_0: Final = ((ITEM_VALUE_JSON << 3) | _LEN) & 0x7F | 0x80  # 0x82
_TAG_VALUE_JSON_1: Final = ((ITEM_VALUE_JSON << 3) | _LEN) >> 7  # 0x01

_TAG_RECORD_NUM: Final = (RECORD_NUM << 3) | _VARINT  # 0x08
# Members of Record's record_type oneof (wandb 0.31: 2-13, 17, 18, 20-27, request=100)
_RECORD_TYPES: Final = frozenset(range(2, 28)) - {RECORD_CONTROL, RECORD_UUID} | {100}

_MAX_WARNINGS: Final = 50
_RECORD_HEADER = struct.Struct("<IHB")
_CRC_SEED: Final = tuple(zlib.crc32(bytes([t])) for t in range(256))
_MISSING: Final = object()


@dataclass
class WandbLog:
    """What :func:`read_wandb_log` found in one ``run-<id>.wandb`` file.

    ``history``: one dict per history record (a ``wandb.log`` commit), key -> JSON-decoded value.
    Keys are ``HistoryItem.key`` or the ``nested_key`` parts joined with ``/``; a non-media
    dict value is flattened the same way (``{"a": {"b": 1}}`` -> ``"a/b": 1``), so files of the
    old Python core and of the Go core give the same keys. Media values (dicts with a
    ``"_type"``, e.g. images and tables, which the Go core splits into one item per field) are
    kept as one dict under the media key. ``_step``, ``_runtime`` and ``_timestamp`` are
    included when present (``_step`` falls back to ``HistoryRecord.step.num``). ``NaN``,
    ``Infinity`` and ``-Infinity`` decode to float nan / inf.

    ``config``: the run config (nested dicts kept), later records updating earlier ones, W&B's
    ``{"value": ..., "desc": ...}`` wrapping removed. ``summary``: final summary values, keyed
    like ``history``. ``run``: metadata from the RunRecord, HeaderRecord and RunExitRecord (only
    the keys the file sets). ``warnings``: recoverable problems, each naming file and offset.
    """

    path: str
    history: list[dict[str, object]] = field(default_factory=list)
    config: dict[str, object] = field(default_factory=dict)
    summary: dict[str, object] = field(default_factory=dict)
    run: dict[str, object] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


_Items = list[tuple[int, "str | tuple[str, ...]", object]]


class _Decoded:
    """A value decoded from HistoryItem's legacy typed fields (not value_json)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def read_wandb_log(
    path: str | os.PathLike[str], *, check_crc: bool = True, warn: bool = True
) -> WandbLog:
    """Read a W&B ``run-<id>.wandb`` transaction log.

    Raises :class:`MalformedRunError` when the file cannot be read or does not start with the
    W&B header. Damage after the header (truncation, CRC mismatch, bad record type, undecodable
    record or value) is reported in ``WandbLog.warnings``, keeping everything readable before
    and after it; with ``warn=True`` each is also issued as a :class:`CurvediagWarning` (pass
    ``warn=False`` when the caller relays ``WandbLog.warnings`` itself). ``check_crc=False``
    skips CRC verification (about 3% faster).
    """
    spath = os.fspath(path)
    try:
        data = read_chunked(Path(spath))
    except OSError as exc:
        raise MalformedRunError(spath, f"cannot read file: {exc}") from exc
    if len(data) < FILE_HEADER_SIZE or data[:4] != MAGIC:
        what = "empty file" if not data else "no W&B header (expected b':W&B')"
        raise MalformedRunError(spath, f"not a W&B transaction log: {what}")
    ident, version = struct.unpack_from("<HB", data, 4)
    if ident != IDENT:
        raise MalformedRunError(spath, f"bad W&B header identifier 0x{ident:04X}")
    if version != VERSION:
        raise MalformedRunError(spath, f"unsupported W&B log version {version}")
    reader = _Reader(spath)
    reader.read(data, check_crc)
    log = reader.finish()
    for message in log.warnings if warn else ():
        warnings.warn(message, CurvediagWarning, stacklevel=2)
    return log


def _json_value(raw: bytes) -> object:
    """Decode one ``value_json``: fast path for plain numbers, json.loads otherwise.

    ``NaN``/``Infinity``/``-Infinity`` (bare or inside containers) decode to floats.
    Raises ValueError when the text is not JSON.
    """
    try:
        if raw.isdigit():
            return int(raw)
        value = float(raw)
    except ValueError:
        pass
    else:
        if raw[0] == 0x2D and raw[1:].isdigit():  # negative integer
            return int(raw)
        return value
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def _is_media(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("_type"), str)


def _flatten_into(out: dict[str, object], prefix: str, value: dict[str, object]) -> None:
    for k, v in value.items():
        name = f"{prefix}/{k}"
        if isinstance(v, dict) and v and not _is_media(v):
            _flatten_into(out, name, v)
        else:
            out[name] = v


def _collapse_media(row: dict[str, object], multi: list[tuple[tuple[str, ...], object]]) -> None:
    """Re-assemble media values the Go core split into one item per field.

    ``multi`` holds the (nested_key parts, value) of the row's multi-part items. Every item
    under a prefix that has a string ``_type`` child becomes part of one dict at that prefix.
    """
    prefixes = {
        parts[:-1] for parts, value in multi if parts[-1] == "_type" and isinstance(value, str)
    }
    if not prefixes:
        return
    for parts, value in multi:
        for k in range(1, len(parts)):
            prefix = parts[:k]
            if prefix in prefixes:
                row.pop("/".join(parts), None)
                media_key = "/".join(prefix)
                node = row.get(media_key)
                if not isinstance(node, dict):
                    node = {}
                    row[media_key] = node
                for part in parts[k:-1]:
                    child = node.get(part)
                    if not isinstance(child, dict):
                        child = {}
                        node[part] = child
                    node = child
                node[parts[-1]] = value
                break


def _normalize_dict_values(row: dict[str, object]) -> None:
    """Flatten non-media dict values into '/'-joined keys (old Python-core files)."""
    nested = [k for k, v in row.items() if isinstance(v, dict) and v and not _is_media(v)]
    for key in nested:
        value = row[key]
        assert isinstance(value, dict)
        flat: dict[str, object] = {}
        try:
            _flatten_into(flat, key, value)
        except RecursionError:
            continue  # absurdly deep: keep the dict as it is
        del row[key]
        row.update(flat)


def _unwrap_config_value(value: object) -> object:
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


# --------------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.log = WandbLog(path=path)
        self.n_warnings = 0
        self.key_cache: dict[bytes, str] = {}
        self.offset = 0  # offset of the record being decoded, for warnings
        self.raw_summary: dict[str, tuple[str | tuple[str, ...], object, int]] = {}

    # -- warnings --------------------------------------------------------------------------
    def warn(self, offset: int, problem: str) -> None:
        self.n_warnings += 1
        if self.n_warnings <= _MAX_WARNINGS:
            self.log.warnings.append(f"{self.path}: offset {offset}: {problem}")

    def finish(self) -> WandbLog:
        if self.n_warnings > _MAX_WARNINGS:
            extra = self.n_warnings - _MAX_WARNINGS
            self.log.warnings.append(f"{self.path}: {extra} further problem(s) not listed")
        self.decode_summary()
        config = self.log.config
        for key in list(config):
            config[key] = _unwrap_config_value(config[key])
        return self.log

    # -- framing ---------------------------------------------------------------------------
    def read(self, data: bytes, check_crc: bool) -> None:
        n = len(data)
        pos = FILE_HEADER_SIZE
        unpack = _RECORD_HEADER.unpack_from
        crc32 = zlib.crc32
        seeds = _CRC_SEED
        parts: list[bytes] = []
        frag_start = -1  # offset of the FIRST fragment being assembled, -1 when none
        resync = False  # skipping continuation fragments after damage
        # progress: tell every ~1% of the file (when someone listens)
        every = max(n // 100, _progress.MIN_STEP) if listening() else n + 1
        next_tell = every
        while pos < n:
            if pos >= next_tell:
                tell(self.path, "decoding", pos, n)
                next_tell = pos + every
            left = BLOCK_SIZE - pos % BLOCK_SIZE
            if left < RECORD_HEADER_SIZE:
                pos += left  # block trailer: zero padding
                continue
            if pos + RECORD_HEADER_SIZE > n:
                self.warn(pos, f"file ends inside a record header ({n - pos} of 7 bytes)")
                break
            crc, length, rtype = unpack(data, pos)
            start = pos + RECORD_HEADER_SIZE
            stop = start + length
            problem = ""
            if rtype == 0 and length == 0 and crc == 0:
                if not data[pos:].strip(b"\x00"):
                    self.warn(pos, f"file ends with {n - pos} zero bytes (unfinished write)")
                    break
                problem = "zeroed record header"
            elif rtype < FULL or rtype > LAST:
                problem = f"bad record type {rtype}"
            elif stop > n:
                problem = f"truncated record (needs {length} bytes, file has {n - start})"
            elif length > left - RECORD_HEADER_SIZE:
                problem = f"record length {length} crosses a block boundary"
            elif check_crc and crc32(data[start:stop], seeds[rtype]) != crc:
                problem = "CRC mismatch"
            if problem:
                if frag_start >= 0:
                    self.warn(frag_start, "fragmented record lost to later damage")
                    parts = []
                    frag_start = -1
                self.warn(pos, problem + "; skipping to the next block")
                resync = True
                pos += left  # next block
                continue
            pos = stop
            if rtype == FULL:
                if frag_start >= 0:
                    self.warn(frag_start, "fragmented record without its LAST fragment")
                    parts = []
                    frag_start = -1
                resync = False
                self.record(data[start:stop], start - RECORD_HEADER_SIZE)
            elif rtype == FIRST:
                if frag_start >= 0:
                    self.warn(frag_start, "fragmented record without its LAST fragment")
                resync = False
                parts = [data[start:stop]]
                frag_start = start - RECORD_HEADER_SIZE
            elif frag_start < 0:
                if not resync:
                    self.warn(
                        start - RECORD_HEADER_SIZE, "record fragment without a FIRST fragment"
                    )
                if rtype == LAST:
                    resync = False
            elif rtype == MIDDLE:
                parts.append(data[start:stop])
            else:  # LAST
                parts.append(data[start:stop])
                self.record(b"".join(parts), frag_start)
                parts = []
                frag_start = -1
        if frag_start >= 0:
            self.warn(frag_start, "file ends inside a fragmented record")

    # -- Record ----------------------------------------------------------------------------
    def record(self, buf: bytes, offset: int) -> None:
        self.offset = offset
        try:
            self._record(buf)
        except (_DecodeError, IndexError, ValueError, OverflowError, RecursionError) as exc:
            self.warn(offset, f"undecodable record ({exc or type(exc).__name__})")

    def _record(self, buf: bytes) -> None:
        end = len(buf)
        pos = 0
        if end and buf[0] == _TAG_RECORD_NUM:  # int64 num, first in field order: skip it
            pos = 1
            while pos < end and buf[pos] >= 0x80:
                pos += 1
            pos += 1
        while pos < end:
            tag = buf[pos]
            if tag < 0x80:
                pos += 1
            else:
                tag, pos = _varint(buf, pos, end)
            if tag & 7 != _LEN:
                if tag >> 3 == 0:
                    raise _DecodeError("field number 0")
                pos = _skip(buf, pos, end, tag & 7, tag >> 3)
                continue
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos, end)
            number = tag >> 3
            stop = pos + length
            if stop > end:
                raise _DecodeError("field runs past the end of the record")
            if number not in _RECORD_TYPES:
                pos = stop
                continue
            # The record_type oneof member: decode it if needed; the rest (control, uuid,
            # _info, unknown fields) is of no interest.
            if number == RECORD_HISTORY:
                self.history(buf, pos, stop)
            elif number == RECORD_SUMMARY:
                self.summary_record(buf, pos, stop)
            elif number == RECORD_CONFIG:
                self.config_record(buf, pos, stop)
            elif number == RECORD_RUN:
                self.run_record(buf, pos, stop)
            elif number == RECORD_EXIT:
                self.exit_record(buf, pos, stop)
            elif number == RECORD_HEADER:
                self.header_record(buf, pos, stop)
            elif number == RECORD_FINAL:
                self.log.run["finished"] = True
            return

    # -- items -----------------------------------------------------------------------------
    def key_text(self, raw: bytes) -> str:
        text = self.key_cache.get(raw)
        if text is None:
            text = raw.decode("utf-8", "replace")
            self.key_cache[raw] = text
        return text

    def item(self, buf: bytes, pos: int, end: int) -> tuple[str | tuple[str, ...] | None, object]:
        """Decode a HistoryItem/ConfigItem/SummaryItem (general path).

        Returns (key, raw): key is a str for a single key part, a tuple for several parts, None
        when absent; raw is the value_json bytes, a :class:`_Decoded` for the legacy value
        fields, or None when the item has no value.
        """
        key: str | None = None
        nested: list[str] = []
        raw: object = None
        for number, wire_type, a, b in _fields(buf, pos, end):
            if wire_type == _LEN:
                if number == ITEM_KEY:
                    key = self.key_text(buf[a:b])
                elif number == ITEM_NESTED_KEY:
                    nested.append(self.key_text(buf[a:b]))
                elif number in (ITEM_VALUE_JSON, HISTORY_ITEM_JSON):
                    raw = buf[a:b]
                elif number == HISTORY_ITEM_TEXT:
                    raw = _Decoded(_text(buf, a, b))
            elif wire_type == _VARINT:
                if number == HISTORY_ITEM_NONE:
                    raw = _Decoded(None)
                elif number == HISTORY_ITEM_BOOLEAN:
                    raw = _Decoded(bool(a))
                elif number == HISTORY_ITEM_INTEGER:
                    raw = _Decoded((a >> 1) ^ -(a & 1))  # zigzag (sint64)
            elif wire_type == _FIXED64 and number == HISTORY_ITEM_NUMBER:
                raw = _Decoded(struct.unpack("<d", buf[a:b])[0])
        if len(nested) == 1:
            return nested[0], raw
        if nested:
            return tuple(nested), raw
        return key, raw

    def config_items(self, buf: bytes, pos: int, end: int) -> _Items:
        """Split a ConfigRecord into [(field number, key, raw value), ...].

        Field number 1 is ``update``, 2 is ``remove``; items without a key (or, for updates,
        without a value) are dropped.
        """
        out: _Items = []
        for number, wire_type, a, b in _fields(buf, pos, end):
            if wire_type == _LEN and number in (UPDATE, REMOVE):
                key, raw = self.item(buf, a, b)
                if key is not None and (raw is not None or number == REMOVE):
                    out.append((number, key, raw))
        return out

    def json(self, raw: bytes) -> object:
        if not raw:
            return _MISSING
        try:
            return _json_value(raw)
        except ValueError:
            self.warn(self.offset, f"value is not JSON: {raw[:60]!r}")
            return _MISSING

    def value(self, raw: object) -> object:
        """Decode a raw value from :meth:`scan` (general path)."""
        if isinstance(raw, _Decoded):
            return raw.value
        if isinstance(raw, bytes):
            return self.json(raw)
        return _MISSING

    # -- HistoryRecord / SummaryRecord (hot paths, scanning inlined) ------------------------
    def history(self, buf: bytes, pos: int, end: int) -> None:
        row: dict[str, object] = {}
        multi: list[tuple[tuple[str, ...], object]] | None = None
        step: int | None = None
        has_dict = False
        cache = self.key_cache
        value: object
        while pos < end:
            tag = buf[pos]
            if tag == _TAG_HISTORY_ITEM:
                n = buf[pos + 1]
                if n < 0x80:
                    pos += 2
                else:
                    n, pos = _varint(buf, pos + 1, end)
                stop = pos + n
                if stop > end:
                    raise _DecodeError("history item runs past its record")
                # Fast path: (key | one nested_key) then value_json, lengths < 128.
                k = buf[pos + 1] if pos + 2 <= stop else 0x80
                q = pos + 2 + k
                if (
                    k < 0x80
                    and q + 3 <= stop
                    and buf[q] == _TAG_VALUE_JSON_0
                    and buf[q + 1] == _TAG_VALUE_JSON_1
                    and q + 3 + buf[q + 2] == stop
                    and (buf[pos] == _TAG_ITEM_KEY or buf[pos] == _TAG_ITEM_NESTED_KEY)
                ):
                    raw_key = buf[pos + 2 : q]
                    try:
                        key = cache[raw_key]
                    except KeyError:
                        key = self.key_text(raw_key)
                    raw = buf[q + 3 : stop]
                    pos = stop
                    # value_json fast path: plain numbers without json.loads
                    try:
                        if raw.isdigit():
                            row[key] = int(raw)
                            continue
                        value = float(raw)
                        if raw[0] == 0x2D and raw[1:].isdigit():
                            value = int(raw)
                        row[key] = value
                        continue
                    except ValueError:
                        pass
                    value = self.json(raw)
                    if value is _MISSING:
                        continue
                    if isinstance(value, dict):
                        has_dict = True
                    row[key] = value
                    continue
                skey, graw = self.item(buf, pos, stop)
                pos = stop
                if skey is None:
                    continue
                value = self.value(graw)
                if value is _MISSING:
                    continue
                if isinstance(value, dict):
                    has_dict = True
                if isinstance(skey, str):
                    row[skey] = value
                else:
                    row["/".join(skey)] = value
                    if multi is None:
                        multi = []
                    multi.append((skey, value))
            elif tag == _TAG_HISTORY_STEP:
                n, pos = _varint(buf, pos + 1, end)
                stop = pos + n
                if stop > end:
                    raise _DecodeError("history step runs past its record")
                step = 0
                if pos < stop and buf[pos] == _TAG_STEP_NUM:
                    step, p = _varint(buf, pos + 1, stop)
                    step = _signed(step)
                else:
                    p = pos
                if p != stop:
                    for number, wire_type, a, _b in _fields(buf, pos, stop):
                        if number == HISTORY_STEP_NUM and wire_type == _VARINT:
                            step = _signed(a)
                pos = stop
            else:
                pos = _skip_field(buf, pos, end)
        if pos != end:
            raise _DecodeError("history record runs past its end")
        if multi is not None:
            _collapse_media(row, multi)
        if has_dict:
            _normalize_dict_values(row)
        if step is not None and "_step" not in row:
            row["_step"] = step
        if row:
            self.log.history.append(row)

    def summary_record(self, buf: bytes, pos: int, end: int) -> None:
        # Only the last value of each key matters: keep the raw bytes, decode in finish().
        raw_summary = self.raw_summary
        cache = self.key_cache
        offset = self.offset
        while pos < end:
            tag = buf[pos]
            if tag in (_TAG_UPDATE, _TAG_REMOVE):
                n = buf[pos + 1]
                if n < 0x80:
                    pos += 2
                else:
                    n, pos = _varint(buf, pos + 1, end)
                stop = pos + n
                if stop > end:
                    raise _DecodeError("summary item runs past its record")
                k = buf[pos + 1] if pos + 2 <= stop else 0x80
                q = pos + 2 + k
                if (
                    tag == _TAG_UPDATE
                    and k < 0x80
                    and q + 3 <= stop
                    and buf[q] == _TAG_VALUE_JSON_0
                    and buf[q + 1] == _TAG_VALUE_JSON_1
                    and q + 3 + buf[q + 2] == stop
                    and (buf[pos] == _TAG_ITEM_KEY or buf[pos] == _TAG_ITEM_NESTED_KEY)
                ):
                    raw_key = buf[pos + 2 : q]
                    try:
                        key = cache[raw_key]
                    except KeyError:
                        key = self.key_text(raw_key)
                    raw_summary[key] = (key, buf[q + 3 : stop], offset)
                    pos = stop
                    continue
                skey, graw = self.item(buf, pos, stop)
                pos = stop
                if skey is None:
                    continue
                name = skey if isinstance(skey, str) else "/".join(skey)
                if tag == _TAG_REMOVE:
                    prefix = name + "/"
                    for old in [
                        old for old in raw_summary if old == name or old.startswith(prefix)
                    ]:
                        del raw_summary[old]
                elif graw is not None:
                    raw_summary[name] = (skey, graw, offset)
            else:
                pos = _skip_field(buf, pos, end)
        if pos != end:
            raise _DecodeError("summary record runs past its end")

    def decode_summary(self) -> None:
        summary = self.log.summary
        multi: list[tuple[tuple[str, ...], object]] = []
        for name, (key, raw, offset) in self.raw_summary.items():
            self.offset = offset
            value = self.value(raw)
            if value is _MISSING:
                continue
            summary[name] = value
            if isinstance(key, tuple):
                multi.append((key, value))
        if multi:
            _collapse_media(summary, multi)
        _normalize_dict_values(summary)

    def config_record(self, buf: bytes, pos: int, end: int) -> None:
        config = self.log.config
        for number, key, raw in self.config_items(buf, pos, end):
            parts = (key,) if isinstance(key, str) else key
            node: dict[str, object] = config
            for part in parts[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    if number == REMOVE:
                        break
                    child = {}
                    node[part] = child
                node = child
            else:
                if number == REMOVE:
                    node.pop(parts[-1], None)
                else:
                    value = self.value(raw)
                    if value is not _MISSING:
                        node[parts[-1]] = value

    # -- RunRecord / RunExitRecord / HeaderRecord ------------------------------------------
    def run_record(self, buf: bytes, pos: int, end: int) -> None:
        run = self.log.run
        strings = {
            RUN_ID: "run_id",
            RUN_ENTITY: "entity",
            RUN_PROJECT: "project",
            RUN_GROUP: "group",
            RUN_JOB_TYPE: "job_type",
            RUN_DISPLAY_NAME: "display_name",
            RUN_NOTES: "notes",
            RUN_SWEEP_ID: "sweep_id",
            RUN_HOST: "host",
            RUN_STORAGE_ID: "storage_id",
        }
        bools = {RUN_RESUMED: "resumed", RUN_FORKED: "forked", RUN_RESUME: "resume"}
        tags: list[str] = []
        for number, wire_type, a, b in _fields(buf, pos, end):
            if wire_type == _LEN:
                if number in strings:
                    run[strings[number]] = _text(buf, a, b)
                elif number == RUN_TAGS:
                    tags.append(_text(buf, a, b))
                elif number == RUN_CONFIG:
                    self.config_record(buf, a, b)
                elif number == RUN_SUMMARY:
                    self.summary_record(buf, a, b)
                elif number == RUN_START_TIME:
                    seconds = nanos = 0
                    for n2, w2, a2, _b2 in _fields(buf, a, b):
                        if w2 == _VARINT and n2 == TIMESTAMP_SECONDS:
                            seconds = _signed(a2)
                        elif w2 == _VARINT and n2 == TIMESTAMP_NANOS:
                            nanos = _signed(a2)
                    run["start_time"] = seconds + nanos / 1e9
                elif number == RUN_TELEMETRY:
                    names = {
                        TELEMETRY_PYTHON_VERSION: "python_version",
                        TELEMETRY_CLI_VERSION: "cli_version",
                        TELEMETRY_HUGGINGFACE_VERSION: "huggingface_version",
                    }
                    for n2, w2, a2, b2 in _fields(buf, a, b):
                        if w2 == _LEN and n2 in names:
                            run[names[n2]] = _text(buf, a2, b2)
                elif number == RUN_GIT:
                    for n2, w2, a2, b2 in _fields(buf, a, b):
                        if w2 == _LEN and n2 == GIT_REMOTE_URL:
                            run["git_remote_url"] = _text(buf, a2, b2)
                        elif w2 == _LEN and n2 == GIT_COMMIT:
                            run["git_commit"] = _text(buf, a2, b2)
            elif wire_type == _VARINT:
                if number in bools:
                    run[bools[number]] = bool(a)
                elif number == RUN_STARTING_STEP:
                    run["starting_step"] = _signed(a)
                elif number == RUN_RUNTIME:
                    run["runtime"] = _signed(a)
        if tags:
            run["tags"] = tags

    def exit_record(self, buf: bytes, pos: int, end: int) -> None:
        run = self.log.run
        run["exit_code"] = 0  # proto3 omits zero
        for number, wire_type, a, _b in _fields(buf, pos, end):
            if wire_type == _VARINT and number == EXIT_CODE:
                run["exit_code"] = _signed(a)
            elif wire_type == _VARINT and number == EXIT_RUNTIME:
                run["exit_runtime"] = _signed(a)

    def header_record(self, buf: bytes, pos: int, end: int) -> None:
        for number, wire_type, a, b in _fields(buf, pos, end):
            if number == HEADER_VERSION_INFO and wire_type == _LEN:
                for n2, w2, a2, b2 in _fields(buf, a, b):
                    if n2 == VERSION_INFO_PRODUCER and w2 == _LEN:
                        self.log.run["wandb_version"] = _text(buf, a2, b2)
