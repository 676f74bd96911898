"""`kit base`: the local Debian base image, for sites whose engine cannot pull, made
reproducibly (mmdebstrap with SOURCE_DATE_EPOCH, kit.image.reproducible)."""

import os
import re
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from kit.core import schema, settings
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.proc import stream, which
from kit.image import engine, reproducible

MIRROR_FIX = "give the mirror's URL, as apt's sources name it (http://HOST/debian)"
SNAPSHOT_FIX = "give the snapshot service's archive URL, under which each time is a folder"

log = logger(__name__)


def base_tag(distro: str) -> str:
    return f"kit/debian:{distro}"


def host_mirror() -> str:
    """The Debian mirror the host's apt already uses (KIT_DEBIAN_MIRROR overrides)."""
    if mirror := settings.value("KIT_DEBIAN_MIRROR"):
        return schema.operand("KIT_DEBIAN_MIRROR", mirror, "mmdebstrap", MIRROR_FIX)
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    sources.append(Path("/etc/apt/sources.list"))
    for f in sources:
        if not f.is_file():
            continue
        for line in f.read_text().splitlines():
            words = line.split()
            if words and words[0] in ("URIs:", "deb") and "security" not in line:
                return next(w for w in words if "://" in w)
    raise KitError("no Debian mirror in /etc/apt; pass --mirror URL or set KIT_DEBIAN_MIRROR")


def snapshot_url(snapshot: str) -> str | None:
    """The Debian archive as of a recipe's snapshot time on the snapshot service
    KIT_DEBIAN_SNAPSHOT names; None without either (the mirror serves then)."""
    if not snapshot or not (service := settings.value("KIT_DEBIAN_SNAPSHOT")):
        return None
    # apt reads it in the build too: http(s) with a host ("http://:8080/" gave apt the
    # archive "http:/TIME"), and no space or bracket to split its sources line
    if not re.fullmatch(r"https?://[^\s\[\]]+", service) or not urlsplit(service).hostname:
        raise KitError(f"KIT_DEBIAN_SNAPSHOT '{schema.printable(service)}' is not an "
                       f"http(s) URL with a host; {SNAPSHOT_FIX}")  # fmt: skip
    return f"{service.rstrip('/')}/{snapshot}/"


def archive(snapshot: str) -> str:
    """Where a recipe's Debian packages come from: its snapshot where a snapshot service
    is set (a mirror moves on; a snapshot keeps the packages a lock names for good), else
    the mirror (host_mirror)."""
    return snapshot_url(snapshot) or host_mirror()


# The base's epoch: every file Debian's packages or the bootstrap wrote later is dated
# this (2026-11-28T00:00:00Z); Debian's own file dates are older and stay.
EPOCH = 1795824000
# What makes a base image kit's reproducible one: a base made otherwise (by an older
# kit's debootstrap) under the same tag is made again.
MADE_BY = f"mmdebstrap minbase, SOURCE_DATE_EPOCH={EPOCH}"
# The host's name and resolver are copied in by mmdebstrap, and a suite whose Release has
# passed its Valid-Until (this kind of machine's trixie and sid) needs apt told so
# while the bootstrap runs; neither is left in the image.
HOOKS = (
    '--aptopt=Acquire::Check-Valid-Until "false"',
    '--customize-hook=rm -f "$1"/etc/resolv.conf "$1"/etc/hostname '
    '"$1"/etc/apt/apt.conf.d/99mmdebstrap',
)


def mmdebstrap_argv(mmdebstrap: str, distro: str, out: Path, mirror: str) -> list[str]:
    return [mmdebstrap, "--mode=root", "--variant=minbase", *HOOKS, distro, str(out), mirror]


def current(tag: str) -> bool:
    """The engine holds tag, made as this kit makes it."""
    info = engine.inspect(tag)
    labels = ((info or {}).get("Config") or {}).get("Labels") or {}
    return labels.get("kit.base.made-by") == MADE_BY


def make(distro: str, mirror: str | None, force: bool) -> str:
    """A minimal root file system by mmdebstrap with SOURCE_DATE_EPOCH (the same bytes
    from the same mirror, whatever the host's clock, name, locale or umask), made a
    one-layer image in reproducible form as kit/debian:<distro>."""
    schema.operand("--suite", distro, "mmdebstrap", "give a Debian suite, e.g. bookworm")
    if mirror is not None:
        schema.operand("--mirror", mirror, "mmdebstrap", MIRROR_FIX)
    tag = base_tag(distro)
    engine.server_version()
    if current(tag) and not force:
        print(f"{tag} already exists (use --force to remake it)")
        return tag
    if os.geteuid() != 0:
        raise KitError("kit base runs mmdebstrap, which needs root: run 'kit base' as root")
    mmdebstrap = which("mmdebstrap", "install it: apt-get install mmdebstrap")
    mirror = mirror or host_mirror()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kit-base-", dir="/var/tmp") as scratch:
        out = Path(scratch) / "rootfs.tar"
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH), "TMPDIR": scratch}
        stream(mmdebstrap_argv(mmdebstrap, distro, out, mirror), "mmdebstrap", env=env)
        labels = {"kit.base.distro": distro, "kit.base.made-by": MADE_BY}
        config = {"Cmd": ["/bin/bash"], "Labels": labels}
        log.info(f"writing {out} as {tag}")
        image = reproducible.from_rootfs(out, tag, EPOCH, config, f"mmdebstrap {distro}")
    print(f"{tag} ({image[:19]}) made in {time.monotonic() - t0:.0f} s")
    return tag
