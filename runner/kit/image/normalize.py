"""`kit normalize`: a SIF that Apptainer built from a kit definition, written again in
reproducible form.

`apptainer build` from a definition writes the time of the build and the path of the
base SIF it read into the SIF (two labels, and the `From:` line of the definition it
keeps), and dates every file `%post` writes at the moment it was written; it has no
`SOURCE_DATE_EPOCH`. Two builds of `pytorch-mpich`'s definition on one machine differed
in those alone: 10,990 dates and two files, every file's content otherwise the same.
This takes the SIF's file system through `kit convert`'s flattening (every date clamped
to the recipe's epoch, which the definition's `kit.source-date-epoch` label carries),
writes those labels and that line as the rendered definition has them, and packs and
wraps it as `kit convert` does: one definition built twice with one Apptainer gives the
same bytes, less the SIF header's ID and dates (kit.image.sif.UNFIXED).
"""

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import scratch
from kit.core.proc import capture, which
from kit.image import convert, rootfs, sif

log = logger(__name__)

LABELS = ".singularity.d/labels.json"
EPOCH = "kit.source-date-epoch"  # the label every kit definition carries
BASE = "{{ BASE_SIF }}"  # the rendered definition's base: the path it was built from goes
DATED = "org.label-schema.build-date"  # Apptainer's, the wall clock's: the epoch's instead
FROM = "org.label-schema.usage.singularity.deffile.from"  # Apptainer's: the base's path
TOOLS_FIX = "install squashfs-tools-ng (Debian package)"


def labels(text: str, epoch: int) -> str:
    """The labels as the definition makes them on any machine: the build's date is the
    epoch's (in the layout of Apptainer's), the base's path the definition's
    `{{ BASE_SIF }}`; written anew, sorted, in kit's layout."""
    held = json.loads(text)
    if DATED in held:
        when = datetime.fromtimestamp(epoch, UTC)
        held[DATED] = f"{when:%A}_{when.day}_{when:%B_%Y}_{when.hour}:{when:%M:%S}_UTC"
    if FROM in held:
        held[FROM] = BASE
    return json.dumps(held, indent=2, sort_keys=True) + "\n"


def definition(text: str) -> str:
    """The definition the SIF keeps, with its `From:` as rendered (`{{ BASE_SIF }}`)."""
    return re.sub(r"^From: .*$", f"From: {BASE}", text, count=1, flags=re.MULTILINE)


def _read(part: Path, path: str) -> str:
    rd = which("rdsquashfs", TOOLS_FIX)
    try:
        return capture([rd, "--cat", f"/{path}", str(part)], f"rdsquashfs {path}")
    except KitError:
        raise KitError(
            f"the SIF has no /{path}: give a SIF that apptainer build made from a kit definition"
        ) from None


def rewrite(source: Path, target: Path) -> int:
    """Write the definition-built SIF `source` in reproducible form as `target`; the
    epoch its dates were clamped to."""
    offset, length = sif.primary_partition(source)
    sqfs2tar = which("sqfs2tar", TOOLS_FIX)
    with scratch("normalize-") as folder:
        part = folder / "source.sqfs"
        with source.open("rb") as f, part.open("wb") as out:
            f.seek(offset)
            while length > 0 and (chunk := f.read(min(length, 1 << 20))):
                out.write(chunk)
                length -= len(chunk)
        held = _read(part, LABELS)
        try:
            epoch = int(json.loads(held)[EPOCH])
        except (ValueError, KeyError, TypeError):
            raise KitError(
                f"'{source}' has no {EPOCH} label: give a SIF built from a kit definition "
                "(containers/IMAGE/IMAGE.def)"
            ) from None
        extra: rootfs.Extra = {
            LABELS: labels(held, epoch).encode(),
            rootfs.BUILT_FROM: definition(_read(part, rootfs.BUILT_FROM)).encode(),
        }
        log.info(f"flattening {source} with every date at most {epoch} (the recipe's epoch)")
        packed = folder / "image.sqfs"
        convert.flatten_into(
            [sqfs2tar, "--no-xattr", str(part)],
            [*convert.packer(epoch), str(packed)],
            extra,
            epoch,
            str(source),
        )
        part.unlink()
        convert.wrap_sif(packed, target)
    return epoch
