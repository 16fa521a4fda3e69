"""A Word or PowerPoint file is a zip: checked here before any library opens it, so that a small file that
inflates to gigabytes (a zip bomb) is refused instead of filling the converter's memory.

Three checks on what the zip declares (member count, total inflated size, each member's ratio), then every
member read through a running count that stops at the cap: a zip whose headers lie about the sizes is caught by
the count (and by zipfile's CRC check), not trusted. The child's memory limit (`sandbox`) stays the backstop.
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass

from kb_core.errors import ConversionLimitRejected, DamagedDocumentRejected, ProtectedDocumentRejected

_CHUNK = 1 << 16
_END_RECORD = b"PK\x05\x06"  # the end of the central directory: 22 bytes and a comment of up to 64 KB


@dataclass(frozen=True)
class ZipLimits:
    max_members: int = 10_000  # a large deck has a few thousand parts
    max_inflated: int = 128 * 1024 * 1024  # all members together, inflated
    max_ratio: int = 200  # inflated / compressed of one member: real XML stays below 100, bombs reach 1000+
    ratio_from: int = 1024 * 1024  # a member inflating to less than this may have any ratio (tiny XML parts)


def declared_members(data: bytes) -> int | None:
    """How many members the zip's end record declares, read before `zipfile` parses its directory (a 5 MB zip
    can declare a hundred thousand members); None when there is no plain end record (zip64, or damage)."""
    at = data.rfind(_END_RECORD, max(0, len(data) - 22 - 65535))
    if at < 0 or len(data) < at + 22:
        return None
    (count,) = struct.unpack("<H", data[at + 10:at + 12])
    return None if count == 0xFFFF else count


def check_members(data: bytes, file_name: str, limits: ZipLimits = ZipLimits()) -> None:
    count = declared_members(data)
    if count is not None and count > limits.max_members:
        raise ConversionLimitRejected(f"{file_name} holds {count:,} zip members, more than the "
                                      f"{limits.max_members:,} a document may have: nothing was written",
                                      limit="zip")


def check_zip(data: bytes, file_name: str, limits: ZipLimits = ZipLimits()) -> None:
    """Refuse `data` (a zip) with `ConversionLimitRejected` when it holds too many members or inflates past
    the limits, declared or real; `DamagedDocumentRejected` when it cannot be read to the end."""
    check_members(data, file_name, limits)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            _check_declared(members, file_name, limits)
            total = 0
            for info in members:
                total = _inflate(archive, info, total, file_name, limits)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError, OSError) as exc:
        raise DamagedDocumentRejected(f"{file_name} is a damaged or truncated zip ({exc}): upload the complete "
                                      "file, or save it again from its application") from None


def _too_big(file_name: str, what: str, limits: ZipLimits) -> ConversionLimitRejected:
    return ConversionLimitRejected(
        f"{file_name} {what}, past the limit of {limits.max_inflated // (1024 * 1024)} MB inflated "
        f"(a zip bomb, or a document too large to convert): nothing was written", limit="zip")


def _check_declared(members: list[zipfile.ZipInfo], file_name: str, limits: ZipLimits) -> None:
    if len(members) > limits.max_members:
        raise ConversionLimitRejected(f"{file_name} holds {len(members):,} zip members, more than the "
                                      f"{limits.max_members:,} a document may have: nothing was written",
                                      limit="zip")
    declared = sum(info.file_size for info in members)
    if declared > limits.max_inflated:
        raise _too_big(file_name, f"declares {declared:,} bytes once inflated", limits)
    for info in members:
        if info.flag_bits & 0x1:
            raise ProtectedDocumentRejected(f"{file_name} holds encrypted parts ({info.filename}): remove the "
                                            "password and upload it again")
        if info.file_size > limits.ratio_from and info.file_size > limits.max_ratio * max(info.compress_size, 1):
            raise ConversionLimitRejected(
                f"{file_name}: its part {info.filename} inflates {info.file_size // max(info.compress_size, 1):,} "
                f"times (more than {limits.max_ratio}), as a zip bomb does: nothing was written", limit="zip")


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, total: int, file_name: str,
             limits: ZipLimits) -> int:
    """Read one member to its end (zipfile checks its CRC there), counting; the new running total."""
    seen = 0
    with archive.open(info) as member:
        while chunk := member.read(_CHUNK):
            seen += len(chunk)
            total += len(chunk)
            if total > limits.max_inflated:
                raise _too_big(file_name, "inflates to more than it declares", limits)
    if seen != info.file_size:
        raise DamagedDocumentRejected(f"{file_name}: its part {info.filename} is not the size its zip header "
                                      "says: upload the complete file, or save it again from its application")
    return total
