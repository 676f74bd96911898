"""`kit base`: the local Debian base image, for sites whose engine cannot pull."""

import os
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kit.core import schema, settings
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.proc import stream, which
from kit.image import engine

MIRROR_FIX = "give the mirror's URL, e.g. http://deb.debian.org/debian"

log = logger(__name__)


def base_tag(distro: str) -> str:
    return f"kit/debian:{distro}"


def host_mirror() -> str:
    """The Debian mirror the host's apt already uses (KIT_DEBIAN_MIRROR overrides)."""
    if mirror := settings.value("KIT_DEBIAN_MIRROR"):
        return schema.operand("KIT_DEBIAN_MIRROR", mirror, "debootstrap", MIRROR_FIX)
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


def make(distro: str, mirror: str | None, force: bool) -> str:
    """debootstrap a minimal root file system and import it as kit/debian:<distro>."""
    schema.operand("--suite", distro, "debootstrap", "give a Debian suite, e.g. bookworm")
    if mirror is not None:
        schema.operand("--mirror", mirror, "debootstrap", MIRROR_FIX)
    tag = base_tag(distro)
    engine.server_version()
    if engine.inspect(tag) is not None and not force:
        print(f"{tag} already exists (use --force to remake it)")
        return tag
    if os.geteuid() != 0:
        raise KitError("kit base runs debootstrap, which needs root: run 'kit base' as root")
    debootstrap = which("debootstrap", "install it: apt-get install debootstrap")
    mirror = mirror or host_mirror()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kit-base-", dir="/var/tmp") as root:
        stream([debootstrap, "--variant=minbase", distro, root, mirror], "debootstrap")
        for deb in Path(root, "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        changes = [
            f"LABEL kit.base.distro={distro} kit.base.created={created}",
            'CMD ["/bin/bash"]',
        ]
        argv = [engine.docker(), "import"]
        for c in changes:
            argv += ["--change", c]
        log.info(f"importing {root} as {tag}")
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run([*argv, "-", tag], stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        if tar.wait() != 0 or imp.returncode != 0:
            raise KitError(f"docker import of {root} failed: {imp.stderr.strip()}")
    print(f"{tag} made in {time.monotonic() - t0:.0f} s")
    return tag
