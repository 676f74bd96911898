"""`kit build`: a real `docker build` of a rendered recipe, with the site CA as a secret."""

import hashlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kit.core import inputs, settings
from kit.core.errors import Failed, KitError
from kit.core.log import logger
from kit.core.paths import cache_dir, exclusive, repo_root, sha256_of, write_atomically
from kit.core.proc import stream
from kit.image import convert, debian_base, engine, lock, render, reproducible, wheels
from kit.image.blocks import APT_LIST, CONTENTS, PIP_LIST
from kit.image.recipes import Recipe

log = logger(__name__)
# Where hosts keep their CA bundle: Debian's, Red Hat's, and the one OpenSSL was built with.
HOST_CAS = (
    Path("/etc/ssl/certs/ca-certificates.crt"),
    Path("/etc/pki/tls/certs/ca-bundle.crt"),
    Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/cert.pem"),
)


def ca_bundle(override: Path | None) -> Path | None:
    """The CA bundle pip and curl inside the build trust: --ca-cert, KIT_CA_CERT, or the
    host's own bundle (which carries any site CA that intercepts TLS).

    It also shapes the image: BuildKit leaves the secret's mount point (/run/secrets) in
    the layer only when the secret is not empty, so a build without one is another image
    than the one docs/images.md lists; hence the search of the usual places and a warning."""
    given = settings.value("KIT_CA_CERT")
    chosen = override or (Path(given) if given else None)
    if chosen is not None:
        if not chosen.is_file():
            raise KitError(f"CA bundle '{chosen}' is not a file; pass --ca-cert FILE")
        return chosen
    if found := next((p for p in HOST_CAS if p.is_file() and p.stat().st_size), None):
        return found
    log.warning(
        "warning: no CA bundle on this host: the image built will lack the /run/secrets "
        "mount point, and not be the digest docs/images.md lists; pass --ca-cert FILE"
    )
    return None


@dataclass(frozen=True)
class Options:
    ca_cert: Path | None = None  # CA bundle override (else KIT_CA_CERT, else the host's)
    no_cache: bool = False
    cache_from: tuple[str, ...] = ()  # images whose layers may be reused (CI caches)
    locked: bool = False  # refuse a recipe version that has no lock too
    held: bool = True  # hold the build to the recipe version's lock (kit lock does not)


def build_argv(
    recipe: Recipe, variant: str, ca: Path | None, opts: Options, base: str = ""
) -> list[str]:
    """The docker build command (BuildKit: the CA is a secret, never a layer), FROM `base`
    when given (ensure_base). Images carry inline cache metadata, so a later build can
    reuse them with --cache-from."""
    argv = [
        engine.docker(),
        "build",
        "--progress=plain",
        "-t",
        recipe.tag(variant),
        "-f",
        str(repo_root() / "containers" / recipe.name / render.dockerfile_name(variant)),
    ]
    if ca is not None:
        argv += ["--secret", f"id=cacert,src={ca}"]
    if base:
        argv += ["--build-arg", f"BASE_IMAGE={base}"]
    if index := settings.value("PIP_INDEX_URL"):
        argv += ["--build-arg", f"KIT_PIP_INDEX_URL={index}"]
    argv += ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    for ref in opts.cache_from:
        argv += ["--cache-from", ref]
    if opts.no_cache:
        argv.append("--no-cache")
    return [*argv, str(repo_root())]


SNAPSHOT_SOURCES = "--mount=type=secret,id=aptsources,target=/etc/apt/sources.list"


def from_snapshot(recipe: Recipe, argv: list[str]) -> list[str]:
    """The build argv reading the Debian packages from the recipe's snapshot, where a
    snapshot service is set (KIT_DEBIAN_SNAPSHOT); argv as it was otherwise. The same
    Dockerfile runs, with the snapshot's sources.list mounted over the base's on the steps
    that run apt-get: as a build secret, whose content no layer, history line or build-cache
    key keeps, so the image is the one the mirror's same packages make."""
    url = debian_base.snapshot_url(recipe.snapshot)
    if url is None:
        return argv
    # a snapshot's Release files are signed, and past their Valid-Until by design
    line = f"deb [check-valid-until=no] {url} {recipe.distro} main\n"
    folder = cache_dir() / "snapshots" / hashlib.sha256(line.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / "sources.list", line)
    i = argv.index("-f") + 1
    plain = Path(argv[i])
    mounted = folder / f"{recipe.name}.{plain.name}"
    write_atomically(mounted, render.with_mounts(plain.read_text(), (), (SNAPSHOT_SOURCES,)))
    log.info(f"{recipe.name}: Debian's packages from {url} (the recipe's snapshot)")
    secret = ["--secret", f"id=aptsources,src={folder / 'sources.list'}"]
    return [*argv[:i], str(mounted), *secret, *argv[i + 1 :]]


INDEX = ".kit-index"  # under the repository root (the build context): each lock's pip files
INDEX_ARG = "KIT_PIP_INDEX_URL="


@contextmanager
def from_lock(
    recipe: Recipe, variant: str, held: dict | None, argv: list[str]
) -> Iterator[list[str]]:
    """The build argv with pip held to the recipe version's lock `held` (argv as it was
    without one: a recipe version not locked yet, and `kit lock`'s build). pip then reads
    a local index of the locked files (kit.image.lock.pip_index), mounted on the steps
    that read pip's index: it can install nothing else, and checks each file's SHA-256
    against the lock's. The same Dockerfile runs, so the image is the one the index's same
    files make; the host wheels are checked against the lock before the build. The index
    goes when the build ends: the build context is the checkout, and a build would send
    the engine every other image's index left in it."""
    if held is None:
        yield argv
        return
    lock.check_host_wheels(recipe, variant, held)
    name = f"{recipe.name}-{variant}"
    folder = repo_root() / INDEX / name
    try:
        folder.parent.mkdir(exist_ok=True)
    except OSError as e:
        raise KitError(
            f"cannot write {folder.parent} ({e.strerror}): a locked build serves pip the "
            f"lock's files from the build context; build from a checkout you can write"
        ) from None
    # one build of an image at a time in a checkout (kit verify beside kit build): each
    # removes the index when it ends
    with exclusive(folder.parent / f"{name}.lock", f"the pip index of {name}"):
        shutil.rmtree(folder, ignore_errors=True)
        try:
            (folder / "simple").mkdir(parents=True)  # the mount's source, even if empty
            count = lock.pip_index(recipe, held, folder / "simple")
            log.info(f"{recipe.name}: pip installs the {count} locked file(s) it takes from "
                     f"an index from {folder}, each checked against "
                     f"{lock.path(recipe).name}")  # fmt: skip
            i = argv.index("-f") + 1
            plain = Path(argv[i])
            mounted = cache_dir() / "locked" / name / plain.name
            mounted.parent.mkdir(parents=True, exist_ok=True)
            mount = f"--mount=type=bind,source={INDEX}/{name},target=/srv"
            write_atomically(mounted, render.with_mounts(plain.read_text(), (), index=(mount,)))
            rest: list[str] = []
            for word in argv[i + 1 :]:  # pip's index setting, if given, yields to the lock's
                if word.startswith(INDEX_ARG) and rest[-1:] == ["--build-arg"]:
                    rest.pop()
                else:
                    rest.append(word)
            yield [*argv[:i], str(mounted), "--build-arg", f"{INDEX_ARG}{lock.INDEX_URL}", *rest]
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def ensure_base(recipe: Recipe, variant: str) -> str:
    """The image to build FROM: the local Debian base (made by `kit base`), or a registry
    image (a CUDA variant's) that the engine pulls, or says why it cannot. The local base
    is named by a tag of its content (kit/debian:bookworm-<12 hex digits of its ID>):
    the engine's Dockerfile frontend keeps what a tag resolved to for as long as it runs,
    so a base remade under the same tag was still built from in its old form (seen here:
    a build's two passes on two bases, and none of its steps ever cached again)."""
    base = recipe.base
    info = engine.inspect(base)
    if info is not None and recipe.local_base:
        pinned = f"{base}-{info['Id'].removeprefix('sha256:')[:12]}"
        if engine.inspect(pinned) is None:
            engine.run_quiet(["tag", info["Id"], pinned], "docker tag")
        return pinned
    if info is not None:
        return base
    if recipe.local_base:
        raise KitError(
            f"base image {base} is missing; make it as root with: kit base --suite {recipe.distro}"
        )
    log.info(f"pulling {base} (the {variant} variant builds on it)")
    p = subprocess.run([engine.docker(), "pull", base], capture_output=True, text=True)
    if p.returncode != 0:
        reason = (p.stderr.strip().splitlines() or ["no reason given"])[-1]
        raise KitError(
            f"the {variant} variant of {recipe.name} builds FROM {base}, which this engine "
            f"does not have and cannot pull ({reason}); build it where that image can be "
            f"pulled, or 'docker load' it here first"
        )
    return base


def build(recipe: Recipe, variant: str, opts: Options | None = None) -> str:
    """Build the recipe's image under its tag and file its manifest; the tag."""
    opts = opts or Options()
    recipe = recipe.for_variant(variant)
    t0 = time.monotonic()
    lists = make(recipe, variant, opts, recipe.tag(variant))
    manifest = write_manifest(recipe, variant, lists[APT_LIST], lists[PIP_LIST])
    # the conversions of a build the engine no longer holds (make removed the image the
    # tag named before) are unreachable: 9 GB of them were left here by five rebuilds
    convert.drop_superseded(recipe, variant, convert.artifacts(recipe, variant), [])
    print(
        f"built {recipe.tag(variant)} ({manifest['digest'][:19]}, "
        f"{manifest['size_bytes'] / 1e9:.2f} GB) in {time.monotonic() - t0:.0f} s"
    )
    print(f"manifest {convert.artifacts(recipe, variant).manifest}")
    return recipe.tag(variant)


def make(recipe: Recipe, variant: str, opts: Options, tag: str) -> dict[str, list[str]]:
    """The docker build of a recipe's variant, written in reproducible form as `tag`
    (kit.image.reproducible) with its package lists as labels; the lists.

    Once written, the engine's own output is removed, so the image is stored once, not
    twice (BuildKit's layers and the rewritten ones took 34 GB for the ten images); so is
    the image the tag named before, when no other tag names it. A build whose inputs
    made an image the engine still has is that image (inputs_key), whatever BuildKit's
    cache still holds; --no-cache always builds."""
    render.check([recipe])
    engine.server_version()
    base = ensure_base(recipe, variant)
    wheels.fetch(recipe)
    argv = from_snapshot(recipe, build_argv(recipe, variant, ca_bundle(opts.ca_cert), opts, base))
    held = lock.applying(recipe, variant) if opts.held else None
    key = inputs_key(argv, held)
    before = (engine.found(tag) or {}).get("Id")
    if not opts.no_cache and (made := reproducible.made_from(key)):
        log.info(f"{tag}: these inputs made {made[7:19]}, which is here; not built again")
        labels = (engine.inspect(made) or {}).get("Config", {}).get("Labels") or {}
        lists = {path: labels.get(label, "").split() for label, path in CONTENTS}
        held_to_lock(recipe, variant, opts, lists, made)
        engine.run_quiet(["tag", made, tag], "docker tag")
    else:
        if held and (gone := lock.gone(recipe, held)):
            raise Failed(lock.refusal(recipe, variant, (
                f"{len(gone)} package(s) {lock.path(recipe).name} locks are no longer on "
                f"{debian_base.archive(recipe.snapshot)} ({', '.join(gone[:3])}"
                f"{', ...' if len(gone) > 3 else ''})"
            )))  # fmt: skip
        with from_lock(recipe, variant, held, argv) as locked:
            raw = untagged_build(locked, "docker build")
        lists = contents(raw)
        try:
            held_to_lock(recipe, variant, opts, lists, raw)
        except KitError:
            engine.remove_quiet(raw)
            raise
        log.info(f"writing {tag} in reproducible form (epoch {recipe.epoch})")
        made = rewritten(raw, tag, recipe.epoch, as_labels(lists))
        reproducible.note_inputs(key, made)
    if before and before != made:  # the image the tag named, now named by none
        engine.remove_quiet(before)
    return lists


def rewritten(raw: str, tag: str, epoch: int, labels: dict[str, str]) -> str:
    """The untagged build raw written in reproducible form as tag; its ID. The engine's own
    output goes whether or not the write worked: one that failed (the disk full) had left
    2.6 GB that no tag named."""
    try:
        return reproducible.rewrite(raw, tag, epoch, labels)
    finally:
        engine.remove_quiet(raw)


def held_to_lock(
    recipe: Recipe, variant: str, opts: Options, lists: dict[str, list[str]], image: str
) -> None:
    """Refuse, before the tag moves, an image that is not what its recipe version's lock
    holds (or, with --locked, a version with no lock); said in one line otherwise."""
    said = lock.check(recipe, variant, lists[APT_LIST], image) if opts.held else ""
    if opts.locked and lock.applying(recipe, variant) is None:
        raise Failed(f"{said}; --locked builds only a locked recipe version")
    if said:
        log.info(said)


def inputs_key(argv: list[str], held: dict | None = None) -> str:
    """What a build's image depends on: its arguments (not the engine's path, the tag or
    the CA secret, which no layer keeps), the rendered Dockerfile, what the build context
    sends (.dockerignore: benchmarks/ and the host's wheels), the lock it is held to
    (from_lock: its files by SHA-256), and the reproducible writer's form. The mirrors'
    state is not in it, as it is not in BuildKit's cache key."""
    h = hashlib.sha256(f"form {reproducible.FORM}\n".encode())
    if held is not None:
        h.update(f"lock {json.dumps(held, sort_keys=True)}\n".encode())
    skip = {"-t", "--secret", "--iidfile", "-f"}  # -f: the file's content and name below
    words = argv[1:-1]
    for i, word in enumerate(words):
        if word not in skip and (i == 0 or words[i - 1] not in skip):
            h.update(f"arg {word}\n".encode())
    context = Path(argv[-1])
    files = [Path(words[words.index("-f") + 1]), context / ".dockerignore"]
    for folder in ("benchmarks", ".kit-wheels"):
        files += sorted(p for p in (context / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)  # fmt: skip
    for f in files:
        if f.is_file():
            name = f.relative_to(context) if f.is_relative_to(context) else f.name
            h.update(f"file {name} {f.stat().st_mode & 0o111:o}\n".encode())
            h.update(bytes.fromhex(sha256_of(f)))
    return h.hexdigest()


def untagged_build(argv: list[str], what: str) -> str:
    """Run the docker build argv (BuildKit) with its image left untagged: its ID."""
    with tempfile.TemporaryDirectory(prefix="kit-build-") as scratch:
        iidfile = Path(scratch) / "image-id"
        stream(untagged_argv(argv, iidfile), what, env={**os.environ, "DOCKER_BUILDKIT": "1"})
        return iidfile.read_text().strip()


def contents(image: str) -> dict[str, list[str]]:
    """The package lists the image's last step wrote (kit.image.blocks.CONTENTS), by path."""
    return {path: read_file(image, path) for _, path in CONTENTS}


def as_labels(lists: dict[str, list[str]]) -> dict[str, str]:
    """The package lists as the labels the reproducible writer puts in the config."""
    return {label: " ".join(lists[path]) for label, path in CONTENTS}


def untagged_argv(argv: list[str], iidfile: Path) -> list[str]:
    """The build untagged (its id goes to `iidfile`): until it is written in reproducible
    form it is not the image the tag names, and a `kit run` or a second build beside this
    one must not take it for that (seen with two test workers)."""
    i = argv.index("-t")
    return [*argv[:i], "--iidfile", str(iidfile), *argv[i + 2 :]]


def read_file(image: str, path: str) -> list[str]:
    """Whitespace-separated words of a file in the image (as nobody)."""
    out = subprocess.run(
        [engine.docker(), "run", "--rm", "--user", "65534", image, "cat", path],
        capture_output=True,
        text=True,
    )
    return out.stdout.split()


def write_manifest(recipe: Recipe, variant: str, apt: list[str], pip: list[str]) -> dict:
    """What the image really contains (the package lists read back from it), filed
    beside its conversions."""
    tag = recipe.tag(variant)
    info = engine.inspect(tag) or {}

    art = convert.artifacts(recipe, variant)
    manifest = {
        "image": recipe.name,
        "tag": tag,
        "digest": art.digest,
        "recipe_version": recipe.version,
        "variant": variant,
        "mpi": {"flavour": recipe.mpi.flavour, "version": recipe.mpi.version},
        "size_bytes": info.get("Size", 0),
        "labels": info["Config"].get("Labels") or {},
        "apt": apt,
        "pip": pip,
    }
    art.dir.mkdir(parents=True, exist_ok=True)
    path = art.manifest
    old = inputs.remade(path)  # a rebuild of the same digest keeps what its conversions recorded
    earlier = old.get("conversion") if isinstance(old, dict) else None
    if earlier:
        manifest["conversion"] = earlier
    write_atomically(path, json.dumps(manifest, indent=2) + "\n")
    return manifest
