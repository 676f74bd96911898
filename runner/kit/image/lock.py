"""`kit lock`: every package a recipe version's image holds, with the SHA-256 of the file
it came from, written beside the recipe (recipes/IMAGE.lock.json).

A recipe pins the packages that matter; the hundreds they pull in float with the Debian
mirror and the package index, so the same recipe version rebuilt after a point release is
another image. The lock names them all: each apt package's version with the `.deb`'s
SHA-256 and pool path from the mirror's index (which apt checks against the signed
Release), and each distribution in the image's venv with the SHA-256 of the file it was
installed from: the index's wheel or sdist (pip downloads it for the image's Python), the
host's wheel (`[pip] host`), or the sdist the builder stage compiled. `kit build` says
when an image's packages are not its lock's, naming them, and refuses it before the tag
moves (`check`); a build whose locked packages left the mirror is refused before it
starts (`gone`): the image is then rebuilt from its bundle (kit.image.bundle), never from
what the mirror serves in their place.
"""

import json
import lzma
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kit.core import inputs
from kit.core.errors import Failed, KitError
from kit.core.log import logger
from kit.core.paths import cache_dir, link_or_copy, scratch, sha256_of, write_atomically
from kit.image import debian_base, engine, wheels
from kit.image.recipes import Recipe

log = logger(__name__)

SUFFIX = ".lock.json"
FORMAT = "kit.lock/1"
FIX = "run 'kit lock IMAGE' to take what the mirror and the index serve now"

# The image's venv distributions with the local file pip installed each from (empty for
# the index; the venv's own pip and setuptools come from the wheels Debian ships for
# ensurepip, which the apt lock covers), run in the image as nobody, with no network.
VENV_DISTS = """
import glob, importlib.metadata as m, json, sys
out = []
for d in m.distributions(path=[p for p in sys.path if p.startswith("/opt/kit/venv/")]):
    try:
        url = json.loads(d.read_text("direct_url.json") or "{}").get("url", "")
    except ValueError:
        url = ""
    name = d.metadata["Name"]
    shipped = glob.glob(f"/usr/share/python-wheels/{name}-{d.version}-*.whl")
    out.append([name, d.version, url or ("ensurepip:" + shipped[0] if shipped else "")])
print(json.dumps(sorted(out, key=lambda x: x[0].lower())))
"""


def path(recipe: Recipe) -> Path:
    return recipe.path.with_name(f"{recipe.name}{SUFFIX}")


def normal(name: str) -> str:
    """A distribution's name as pip compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


ARCHIVE_FIX = (
    "set KIT_DEBIAN_MIRROR to a mirror that serves it (KIT_DEBIAN_SNAPSHOT where the recipe "
    "names a snapshot)"
)


def debian_stanzas(mirror: str, suite: str) -> dict[tuple[str, str], str]:
    """(package, version) -> its stanza in the mirror's index of the suite's main
    component (the only one kit's images use), as the index spells it."""
    url = f"{mirror.rstrip('/')}/dists/{suite}/main/binary-amd64/Packages.xz"
    try:
        with urllib.request.urlopen(url, timeout=120) as r:  # the user's mirror setting
            text = lzma.decompress(r.read()).decode()
    except (urllib.error.URLError, OSError, lzma.LZMAError, UnicodeDecodeError) as e:
        raise KitError(f"cannot read {url} ({e}); {ARCHIVE_FIX}") from None
    found = {}
    for stanza in text.split("\n\n"):
        fields = _fields(stanza)
        if {"Package", "Version", "SHA256", "Filename"} <= fields.keys():
            found[(fields["Package"], fields["Version"])] = stanza.strip("\n")
    return found


def _fields(stanza: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line[:60])


def debian_index(mirror: str, suite: str) -> dict[tuple[str, str], dict]:
    """(package, version) -> its file's SHA-256 and pool path, from the mirror's index."""
    index = {}
    for key, stanza in debian_stanzas(mirror, suite).items():
        fields = _fields(stanza)
        index[key] = {"sha256": fields["SHA256"], "pool": fields["Filename"]}
    return index


def venv_dists(image: str) -> list[list[str]]:
    """Each distribution in the image's venv: name, version, the local file it came from
    (empty when pip took it from the index)."""
    argv = [engine.docker(), "run", "--rm", "--network", "none", "--user", "65534", image]
    p = subprocess.run(
        [*argv, "/opt/kit/venv/bin/python", "-c", VENV_DISTS], capture_output=True, text=True
    )
    try:
        dists = json.loads(p.stdout)
    except ValueError:
        dists = None
    if not isinstance(dists, list):
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise KitError(f"cannot list the venv of {image}: {tail}")
    return dists


def platforms(versions: dict[str, str]) -> list[str]:
    """pip's --platform options for the image whose Debian packages are `versions` (name ->
    version): the manylinux tags its glibc (libc6's version) runs, newest first, then plain
    linux, as pip in the image ranks them. Without them the host's pip takes the wheels of
    the host's glibc: on a bookworm host, cryptography's manylinux_2_34 wheel, which the
    pip of a bullseye image (glibc 2.31) passes over for its manylinux_2_28 one."""
    match = re.match(r"(?:\d+:)?2\.(\d+)", versions.get("libc6", ""))
    if match is None:
        raise KitError("the image holds no Debian libc6: kit locks Debian-based images only")
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for minor in range(int(match.group(1)), 4, -1):
        tags += [f"manylinux_2_{minor}", *([legacy[minor]] if minor in legacy else [])]
    return [word for tag in [*tags, "linux"] for word in ("--platform", f"{tag}_x86_64")]


def download(r: Recipe, kind: str, pin: str, dest: Path, platform: list[str]) -> dict:
    """The one file `pip download` fetches for pin into the empty folder dest, with its
    SHA-256: the sdist (kind "sdist") or the wheel for the image's Python and `platform`
    (platforms: "index")."""
    argv = [wheels.HOST_PYTHON, "-m", "pip", "download", "--quiet", "--no-deps"]
    argv += (
        ["--no-binary=:all:"]
        if kind == "sdist"
        else ["--only-binary=:all:", *wheels.for_image(r), *platform]
    )
    dest.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([*argv, "--dest", str(dest), pin], capture_output=True, text=True)
    files = sorted(dest.iterdir())
    if p.returncode != 0 or len(files) != 1:
        tail = (p.stderr.strip().splitlines() or ["no single file"])[-1]
        raise Failed(
            f"pip could not fetch {pin} ({tail}); point pip at an index that "
            "has it (pip.conf, PIP_INDEX_URL or PIP_EXTRA_INDEX_URL)"
        )
    return {"file": files[0].name, "sha256": sha256_of(files[0])}


STORE = "pip-files"  # under KIT_CACHE: each locked pip file, in a folder named by its SHA-256
SERVED = ("index", "sdist")  # what pip took from an index; ensurepip's wheels are .debs
INDEX_URL = "file:///srv/simple"  # where a build's steps that read pip's index see it mounted


def kept(entry: dict) -> Path:
    """Where the store keeps a locked pip file."""
    return cache_dir() / STORE / entry["sha256"] / entry["file"]


def simple_page(entry: dict) -> str:
    """A project's page of a PEP 503 index: its one file, with the SHA-256 pip checks."""
    name = entry["file"]
    return f'<html><body><a href="{name}#sha256={entry["sha256"]}">{name}</a></body></html>\n'


def stored(r: Recipe, entry: dict, platform: list[str]) -> Path:
    """The locked pip file in kit's store (KIT_CACHE/pip-files/SHA-256/FILE), fetched by
    the host's pip and checked against the lock when absent; pip checks it again where it
    installs it (the index page carries the lock's SHA-256)."""
    target = kept(entry)
    if target.is_file():
        return target
    with scratch("pip-file-") as folder:
        pin = f"{entry['name']}=={entry['version']}"
        got = download(r, entry["from"], pin, folder / "d", platform)
        if got != {"file": entry["file"], "sha256": entry["sha256"]}:
            raise Failed(
                f"pip fetched {got['file']} for {entry['name']} {entry['version']}, not the "
                f"locked file ({entry['file']}, SHA-256 {entry['sha256'][:12]}); {FIX}"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(folder / "d" / got["file"], target)  # the same disk: scratch is in the cache
    return target


def pip_index(r: Recipe, held: dict, simple: Path, copy: bool = False) -> int:
    """The lock's pip files that pip takes from an index, as a PEP 503 index in the empty
    folder `simple` (each project's page names its one locked file and that file's
    SHA-256, which pip checks before it installs it: the check --require-hashes makes);
    how many files. A build's files are linked from the store (copied where it is on
    another disk); a bundle's are copied, each checked against the lock as it is, since
    the bundle outlives the store and no pip reads it until its rebuild."""
    served = [e for e in held["pip"] if e["from"] in SERVED]
    if missing := [e for e in served if not kept(e).is_file()]:
        log.info(f"fetching {len(missing)} locked pip file(s) into {cache_dir() / STORE}")
        platform = platforms({e["package"]: e["version"] for e in held["apt"]})
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda e: stored(r, e, platform), missing))
    for e in served:
        page = simple / normal(e["name"])
        page.mkdir(parents=True)
        if copy:
            shutil.copyfile(kept(e), page / e["file"])
            if sha256_of(page / e["file"]) != e["sha256"]:
                raise Failed(
                    f"{kept(e)} is not the file the lock names (SHA-256 differs); remove it "
                    "and bundle again (kit fetches it anew)"
                )
        else:
            link_or_copy(kept(e), page / e["file"])
        (page / "index.html").write_text(simple_page(e))
    return len(served)


def check_host_wheels(r: Recipe, variant: str, held: dict) -> None:
    """Refuse host wheels (`[pip] host`, in .kit-wheels) that are not the files the lock
    names, before anything is built or bundled from them."""
    locked = {normal(e["name"]): e for e in held["pip"] if e["from"] == "host"}
    diff = []
    for pin, f in zip(r.pip_host, wheels.fetch(r), strict=True):
        e = locked.get(normal(pin.split("==")[0]))
        if e is not None and (f.name, sha256_of(f)) != (e["file"], e["sha256"]):
            diff.append(f"{f.name} (lock: {e['file']}, SHA-256 {e['sha256'][:12]})")
    if diff:
        raise Failed(refusal(r, variant, (
            f"{len(diff)} host wheel(s) in {wheels.folder()} are not the locked files "
            f"({'; '.join(diff[:3])})"
        )))  # fmt: skip


def pip_entries(
    r: Recipe, dists: list[list[str]], scratch: Path, platform: list[str]
) -> list[dict]:
    """Each venv distribution with the file it was installed from and that file's SHA-256
    (a wheel: the one pip takes for the image's Python and `platform`)."""
    compiled = {normal(p.split("==")[0]) for p in (r.compile.packages if r.compile else ())}
    from_source = {normal(n) for n in r.pip_from_source} | compiled
    host = {normal(p.split("==")[0]): f for p, f in zip(r.pip_host, wheels.fetch(r), strict=True)}
    entries = []
    for name, version, url in dists:
        pin, key = f"{name}=={version}", normal(name)
        entry = {"name": name, "version": version}
        if key in host:
            entry |= {"from": "host", "file": host[key].name, "sha256": sha256_of(host[key])}
        elif key in from_source:
            entry |= {"from": "sdist", **download(r, "sdist", pin, scratch / key, [])}
        elif url.startswith("ensurepip:"):
            entry |= {"from": "ensurepip", "file": url.removeprefix("ensurepip:")}
        elif url:
            raise KitError(f"{r.name}'s venv has {pin} from {url}, which the recipe does not name")
        else:
            try:
                entry |= {"from": "index", **download(r, "index", pin, scratch / key, platform)}
            except Failed:  # no wheel for the image's Python: pip built the sdist (jax 0.4.13)
                entry |= {"from": "sdist", **download(r, "sdist", pin, scratch / key, [])}
        entries.append(entry)
    return entries


def make(r: Recipe, variant: str, apt: list[str]) -> dict:
    """The lock of the built image (its tag), from its package list `apt` (name=version,
    as the build read it back) and its venv."""
    index = debian_index(debian_base.archive(r.snapshot), r.distro)
    debs, gone = [], []
    for item in apt:
        name, _, version = item.partition("=")
        found = index.get((name, version))
        if found is None:
            gone.append(item)
        else:
            debs.append({"package": name, "version": version, **found})
    if gone:
        raise KitError(
            f"{len(gone)} package(s) of {r.tag(variant)} are not on the mirror now "
            f"({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''}): it moved since the "
            f"image was built; build it again (kit build {r.name} --no-cache), then lock"
        )
    with scratch("lock-") as folder:
        platform = platforms(dict(item.partition("=")[::2] for item in apt))
        pip = pip_entries(r, venv_dists(r.tag(variant)), folder, platform)
    return {
        "format": FORMAT,
        "recipe": r.name,
        "version": r.version,
        "variant": variant,
        "distro": r.distro,
        "apt": debs,
        "pip": pip,
    }


def write(r: Recipe, variant: str, lock: dict) -> Path:
    """Write the variant's lock into the recipe's lock file (other variants kept)."""
    target = path(r)
    held = read(r) or {}
    held[variant] = lock
    write_atomically(target, json.dumps(held, indent=1, sort_keys=True) + "\n")
    return target


def read(r: Recipe) -> dict | None:
    """The recipe's lock file by variant, or None when it has none."""
    target = path(r)
    if not target.exists():
        return None
    data = inputs.read_json(target, str(target), f"remove it and {FIX}")
    if not isinstance(data, dict):
        raise KitError(f"{target} holds no lock by variant; remove it and {FIX}")
    return data


def differences(lock: dict, apt: list[str], pip: list[list[str]]) -> list[str]:
    """What a built image holds otherwise than its lock, apt first, then its venv's pip
    distributions: 'name version (lock: v)', 'name version (not in the lock)',
    'name (only in the lock, v)'."""
    out = []
    built_apt = dict(x.partition("=")[::2] for x in apt)
    built_pip = {normal(name): version for name, version, _ in pip}
    for kind, built, key in (("apt", built_apt, "package"), ("pip", built_pip, "name")):
        locked = {normal(e[key]) if kind == "pip" else e[key]: e["version"] for e in lock[kind]}
        for name in sorted(locked.keys() | built.keys()):
            a, b = locked.get(name), built.get(name)
            if a is None:
                out.append(f"{name} {b} (not in the lock)")
            elif b is None:
                out.append(f"{name} (only in the lock, {a})")
            elif a != b:
                out.append(f"{name} {b} (lock: {a})")
    return out


def applying(r: Recipe, variant: str) -> dict | None:
    """The lock of r's version and variant, or None when it has none (a lock of another
    version does not apply: a new recipe version is locked anew)."""
    held = (read(r) or {}).get(variant)
    if held is None:
        return None
    if not isinstance(held, dict) or not {"apt", "pip", "version"} <= held.keys():
        raise KitError(f"{path(r)} holds no lock for {variant}; remove it and {FIX}")
    return held if held["version"] == r.version else None


def gone(r: Recipe, held: dict) -> list[str]:
    """The locked apt packages (name=version) the mirror's index no longer has: a build
    from the mirror would install others in their place."""
    index = debian_index(debian_base.archive(r.snapshot), r.distro)
    return [f"{e['package']}={e['version']}" for e in held["apt"]
            if (e["package"], e["version"]) not in index]  # fmt: skip


def elsewhere(r: Recipe) -> str:
    """Where else the locked .deb files are: the recipe's snapshot, or another mirror."""
    if not r.snapshot:
        return "point KIT_DEBIAN_MIRROR at a mirror or snapshot that has them"
    if (url := debian_base.snapshot_url(r.snapshot)) is None:
        return (
            f"set KIT_DEBIAN_SNAPSHOT to a Debian snapshot service's archive URL (the recipe "
            f"names the archive as of {r.snapshot})"
        )
    return f"check the recipe's debian_snapshot ({r.snapshot}) and KIT_DEBIAN_SNAPSHOT ({url})"


def refusal(r: Recipe, variant: str, what: str) -> str:
    """How a build held to its lock says what it will not substitute, and the ways out."""
    return (
        f"{what}; build {r.tag(variant)} from its bundle (kit build {r.name} --from-bundle "
        f"DIR), {elsewhere(r)}, point pip at what served the lock, or {FIX}"
    )


def check(r: Recipe, variant: str, apt: list[str], image: str) -> str:
    """What a built image (an engine ID or tag) holds against its lock, in one line: that
    it holds the lock, or that the recipe version has none; a KitError naming the first
    packages that differ (kit build refuses the image then, before the tag moves)."""
    held = applying(r, variant)
    if held is None:
        return f"{r.name} {r.version} has no lock for {variant}: kit lock {r.name} records one"
    if diff := differences(held, apt, venv_dists(image)):
        raise Failed(refusal(r, variant, (
            f"{r.tag(variant)} is not what {path(r).name} locks: {len(diff)} package(s) "
            f"differ ({'; '.join(diff[:3])}{'; ...' if len(diff) > 3 else ''})"
        )))  # fmt: skip
    return f"{r.tag(variant)} holds exactly what {path(r).name} locks"
