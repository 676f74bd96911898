"""What two SIF files of the same image may differ in, by name.

A SIF's global header holds a new random ID and the times of its creation and last
change, and each data object's descriptor the times it was added: `apptainer sif new`
and `sif add` take no option to fix them. Everything else (the squashfs partition kit
made, the descriptors' types, sizes, offsets) is the same for the same image. Layout
(sylabs' SIF format, as Apptainer 1.x writes it; checked by writing one file twice):
a 32-byte launch line, 10-byte magic, 3-byte version, 3-byte architecture, then the
fields below; descriptors of 585 bytes from the offset the header names.
"""

import hashlib
import struct
from pathlib import Path

from kit.core.errors import KitError

MAGIC = b"SIF_MAGIC"
HEADER = {"header ID": (48, 16), "header created": (64, 8), "header modified": (72, 8)}
DESCRIPTORS_TOTAL, DATA_OFFSET = 88, 112  # int64 fields of the header (total, offset)
DESCRIPTOR_SIZE = 585
DESCRIPTOR = {"created": (41, 8), "modified": (49, 8)}  # within a used descriptor
USED = 4  # its one-byte "used" flag
PARTITION, PRIMARY = 0x4004, 2  # a descriptor's data type, and a partition's type (its extra)
SQUASHFS = 1  # a partition's file system type (the extra's first field)
FILE_AT, EXTRA_AT = 17, 201  # within a descriptor: the data's offset and length; its extra
UNFIXED = (*HEADER, *(f"each descriptor's {name}" for name in DESCRIPTOR))


def masked(head: bytearray) -> bytearray:
    """The SIF's header and descriptors (the bytes before its data) with every UNFIXED
    field zeroed."""
    if head[32:41] != MAGIC:
        raise KitError("not a SIF file (no SIF_MAGIC at byte 32)")
    for offset, size in HEADER.values():
        head[offset : offset + size] = bytes(size)
    total, first = struct.unpack_from("<qq", head, DESCRIPTORS_TOTAL)
    for i in range(total):
        base = first + i * DESCRIPTOR_SIZE
        if base + DESCRIPTOR_SIZE > len(head) or not head[base + USED]:
            continue
        for offset, size in DESCRIPTOR.values():
            head[base + offset : base + offset + size] = bytes(size)
    return head


def digest(path: Path) -> str:
    """The SHA-256 of the SIF less its UNFIXED fields: equal for the same image."""
    sha = hashlib.sha256()
    try:
        with path.open("rb") as f:
            start = f.read(DATA_OFFSET + 8)
            if len(start) < DATA_OFFSET + 8:
                raise KitError(f"'{path}' is too short for a SIF file; give a SIF file")
            (data,) = struct.unpack_from("<q", start, DATA_OFFSET)
            head = bytearray(start + f.read(max(0, data - len(start))))
            try:
                sha.update(masked(head))
            except KitError as e:
                raise KitError(f"'{path}' is {e}; give a SIF file") from None
            while chunk := f.read(1 << 20):
                sha.update(chunk)
    except OSError as e:
        raise KitError(f"cannot read '{path}' ({e.strerror}); check the path") from None
    return "sha256:" + sha.hexdigest()


def primary_partition(path: Path) -> tuple[int, int]:
    """The offset and length of the SIF's primary system partition (its file system)."""
    try:
        with path.open("rb") as f:
            start = f.read(DATA_OFFSET + 8)
            if len(start) < DATA_OFFSET + 8 or start[32:41] != MAGIC:
                raise KitError(f"'{path}' is not a SIF file; give a SIF file")
            total, first = struct.unpack_from("<qq", start, DESCRIPTORS_TOTAL)
            f.seek(first)
            table = f.read(total * DESCRIPTOR_SIZE)
    except OSError as e:
        raise KitError(f"cannot read '{path}' ({e.strerror}); check the path") from None
    for base in range(0, len(table) - DESCRIPTOR_SIZE + 1, DESCRIPTOR_SIZE):
        (kind,) = struct.unpack_from("<i", table, base)
        fs, part = struct.unpack_from("<ii", table, base + EXTRA_AT)
        if not (table[base + USED] and kind == PARTITION and part == PRIMARY):
            continue
        offset, length = struct.unpack_from("<qq", table, base + FILE_AT)
        if fs != SQUASHFS:
            raise KitError(f"'{path}' is not a squashfs image (an encrypted or ext3 SIF?)")
        if offset + length > path.stat().st_size:
            raise KitError(f"'{path}' is cut short: its file system ends past the file's end")
        return offset, length
    raise KitError(f"'{path}' holds no file system partition; give a SIF of an image")
