"""`kit bundle` and `kit build --from-bundle`: every input of one recipe version kept by
hash in a folder, and the image rebuilt from it alone with the build's network off.

A bundle holds the build context as the image was made from it (the rendered
Dockerfile, benchmarks/, the host's wheels), the recipe and its lock, the base image
(`docker save`), each locked `.deb` with its stanza of the mirror's index, and each
locked pip file in a PEP 503 index. The offline build runs the *same* Dockerfile with
two read-only bind mounts added to its RUN steps: the bundle's `sources.list` over the
base's (a `file:` repository) and the bundle's files on `/srv`, where pip's index URL
points. BuildKit writes neither a mount nor its flags into the layers or the history,
and both targets exist in the base, so no mount point is left behind: the image is the
one the bundle names, or kit says it is not.
"""

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import kit
from kit.core import inputs
from kit.core.errors import Failed, KitError
from kit.core.log import logger
from kit.core.paths import repo_root, sha256_of, write_atomically
from kit.image import build, debian_base, engine, lock, render, wheels
from kit.image.blocks import APT_LIST
from kit.image.recipes import Recipe

log = logger(__name__)

FORMAT = "kit.bundle/1"
MANIFEST = "bundle.json"
BASE = "base.tar"
CONTEXT = "context"
OFFLINE = ".kit-bundle"  # in the context: sources.list and srv/ (debs/, simple/)
SOURCES = "deb [trusted=yes] file:/srv/debs ./\n"  # each .deb's hash is in its stanza
IGNORE = "*\n!benchmarks\n!.kit-wheels\n!.kit-bundle\n**/__pycache__\n"
MOUNT_SRV = f"--mount=type=bind,source={OFFLINE}/srv,target=/srv"
MOUNT_APT = f"--mount=type=bind,source={OFFLINE}/sources.list,target=/etc/apt/sources.list"
# what the rebuild reads of bundle.json
KEYS = frozenset(
    (
        "format",
        "recipe",
        "version",
        "variant",
        "tag",
        "epoch",
        "digest",
        "dockerfile",
        "base",
        "files",
    )
)
REMAKE = "make it again with 'kit bundle IMAGE --out DIR' where the inputs can be fetched"


def offline_dockerfile(text: str) -> str:
    """The Dockerfile with the bundle's mounts on its RUN steps: /srv on each, the
    bundle's sources over the base's on each that runs apt-get."""
    return render.with_mounts(text, (MOUNT_SRV,), (MOUNT_APT,))


def _tree(folder: Path) -> dict[str, str]:
    """Every file under folder by its relative path, with its SHA-256."""
    return {
        p.relative_to(folder).as_posix(): sha256_of(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def _fetch(url: str, target: Path, sha256: str) -> None:
    try:
        with urllib.request.urlopen(url, timeout=300) as r, target.open("wb") as out:
            shutil.copyfileobj(r, out, 1 << 20)
    except (urllib.error.URLError, OSError) as e:
        raise Failed(f"cannot fetch {url} ({e}); {lock.ARCHIVE_FIX}") from None
    if sha256_of(target) != sha256:
        raise Failed(f"{url} is not the file the lock names (SHA-256 differs); {lock.FIX}")


def _debs(r: Recipe, held: dict, srv: Path) -> None:
    """Each locked .deb from the mirror, checked against the lock, and its stanza."""
    mirror = debian_base.archive(r.snapshot)
    stanzas = lock.debian_stanzas(mirror, r.distro)
    debs = srv / "debs"
    debs.mkdir(parents=True)
    kept = []
    for e in held["apt"]:
        stanza = stanzas.get((e["package"], e["version"]))
        if stanza is None:
            raise Failed(
                f"{e['package']} {e['version']} is no longer on {mirror}; {lock.elsewhere(r)}"
            )
        name = Path(e["pool"]).name
        kept.append("\n".join(
            f"Filename: ./{name}" if line.startswith("Filename: ") else line
            for line in stanza.splitlines()
        ))  # fmt: skip
    log.info(f"fetching {len(held['apt'])} .deb files from {mirror}")
    urls = [(f"{mirror.rstrip('/')}/{e['pool']}", debs / Path(e["pool"]).name, e["sha256"])
            for e in held["apt"]]  # fmt: skip
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda u: _fetch(*u), urls))
    (debs / "Packages").write_text("\n\n".join(kept) + "\n")


def _commit() -> str:
    p = subprocess.run(
        ["git", "-C", str(repo_root()), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return p.stdout.strip() if p.returncode == 0 else ""


def make(r: Recipe, variant: str, out: Path) -> dict:
    """Write the bundle of r's variant into the new folder out; its manifest."""
    if out.exists() and any(out.iterdir()):
        raise KitError(f"'{out}' is not empty; give --out a new or empty folder")
    r.check_variant(variant)
    r = r.for_variant(variant)
    held = lock.applying(r, variant)
    if held is None:
        raise KitError(f"{r.name} {r.version} has no {variant} lock; run 'kit lock {r.name}' first")
    render.check([r])
    tag = r.tag(variant)
    info = engine.inspect(tag)
    if info is None:
        raise KitError(f"{tag} is not built; run 'kit build {r.name}' first")
    apt = build.read_file(tag, APT_LIST)
    lock.check(r, variant, apt, tag)  # the image holds exactly its lock, or no bundle
    lock.check_host_wheels(r, variant, held)
    base = build.ensure_base(r, variant)
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    ctx = out / CONTEXT
    dockerfile = Path("containers") / r.name / render.dockerfile_name(variant)
    (ctx / dockerfile.parent).mkdir(parents=True)
    text = (repo_root() / dockerfile).read_text()
    (ctx / dockerfile).write_text(text)
    (ctx / f"{dockerfile}.offline").write_text(offline_dockerfile(text))
    (ctx / ".dockerignore").write_text(IGNORE)
    shutil.copytree(repo_root() / "benchmarks", ctx / "benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (ctx / wheels.CONTEXT).mkdir()
    for f in wheels.fetch(r):
        shutil.copy2(f, ctx / wheels.CONTEXT / f.name)
    (ctx / "recipes").mkdir()
    shutil.copy2(r.path, ctx / "recipes" / r.path.name)
    shutil.copy2(lock.path(r), ctx / "recipes" / lock.path(r).name)
    srv = ctx / OFFLINE / "srv"
    _debs(r, held, srv)
    lock.pip_index(r, held, srv / "simple", copy=True)
    (ctx / OFFLINE / "sources.list").write_text(SOURCES)
    log.info(f"saving the base image {base}")
    with (out / BASE).open("wb") as f:
        saved = subprocess.run([engine.docker(), "save", base], stdout=f, stderr=subprocess.PIPE)
    if saved.returncode != 0:
        raise Failed(f"docker save {base} failed: {saved.stderr.decode(errors='replace')[-300:]}")
    manifest = {
        "format": FORMAT,
        "recipe": r.name,
        "version": r.version,
        "variant": variant,
        "tag": tag,
        "epoch": r.epoch,
        "digest": info["Id"],
        "dockerfile": dockerfile.as_posix(),
        "base": {"tag": base, "id": engine.image_id(base)},
        "kit": {"version": kit.__version__, "commit": _commit()},
        "made": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "files": _tree(out),
    }
    write_atomically(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    manifest["seconds"] = round(time.monotonic() - t0)
    return manifest


def read(folder: Path) -> dict:
    """The bundle's manifest, each file it names checked by its SHA-256."""
    where = folder / MANIFEST
    if not where.is_file():
        raise KitError(
            f"'{folder}' holds no {MANIFEST}; give --from-bundle a folder kit bundle wrote"
        )
    held = inputs.read_json(where, str(where), REMAKE)
    if not _well_formed(held):
        raise KitError(f"{where} is no {FORMAT} manifest; {REMAKE}")
    log.info(f"checking the SHA-256 of the {len(held['files'])} files of {folder}")
    there = _tree(folder)
    for name in sorted(held["files"].keys() | there.keys()):
        if name not in there:
            raise KitError(f"{folder / name} is missing from the bundle; {REMAKE}")
        if name not in held["files"]:
            raise KitError(f"{folder / name} is not one of the bundle's files; remove it")
        if there[name] != held["files"][name]:
            raise KitError(
                f"{folder / name} is not the file the bundle holds (SHA-256 differs); {REMAKE}"
            )
    return held


def _well_formed(held: object) -> bool:
    """The manifest's fields, each of the type the rebuild reads (a hand-edited one is
    one line, not a traceback)."""
    if not isinstance(held, dict) or held.get("format") != FORMAT or not held.keys() >= KEYS:
        return False
    files, base = held["files"], held["base"]
    texts = [held[k] for k in KEYS - {"files", "base", "epoch"}]
    return (
        isinstance(files, dict)
        and all(isinstance(v, str) for v in [*files, *files.values(), *texts])
        and isinstance(base, dict)
        and all(isinstance(base.get(k), str) for k in ("tag", "id"))
        and isinstance(held["epoch"], int)
        and not isinstance(held["epoch"], bool)
    )


def _base(held: dict, folder: Path) -> str:
    """The bundle's base image in the engine (loaded from base.tar when absent)."""
    base = held["base"]
    if engine.found(base["id"]) is None:
        log.info(f"loading the base image {base['tag']} from {folder / BASE}")
        engine.run_quiet(["load", "--quiet", "--input", str(folder / BASE)], "docker load")
    if engine.image_id(base["id"]) != base["id"]:
        raise Failed(f"{folder / BASE} loaded as another image than {base['id']}; {REMAKE}")
    engine.run_quiet(["tag", base["id"], base["tag"]], "docker tag")
    return base["tag"]


def rebuild(name: str, variant: str, folder: Path) -> tuple[str, str, dict]:
    """Build the bundle's image with the network off; (what it made, its tag, manifest).
    The tag is the recipe's when the image is the one the bundle names, else a scratch
    tag, kept for kit verify --against."""
    held = read(folder)
    if (held["recipe"], held["variant"]) != (name, variant):
        raise KitError(
            f"{folder} is the bundle of {held['recipe']} ({held['variant']}), not {name} "
            f"({variant}); name the image it holds"
        )
    base = _base(held, folder)
    ctx = folder / CONTEXT
    scratch_tag = f"kit-bundle/{held['recipe']}:{held['version']}-{variant}"
    argv = [engine.docker(), "build", "--progress=plain", "-t", scratch_tag, "--network=none",
            "--no-cache", "-f", str(ctx / f"{held['dockerfile']}.offline"),
            "--build-arg", f"BASE_IMAGE={base}",
            "--build-arg", f"KIT_PIP_INDEX_URL={lock.INDEX_URL}"]  # fmt: skip
    if ca := build.ca_bundle(None):  # no TLS offline: for the mount point it leaves
        argv += ["--secret", f"id=cacert,src={ca}"]
    raw = build.untagged_build([*argv, str(ctx)], "docker build (from the bundle, network off)")
    labels = build.as_labels(build.contents(raw))
    same = held["tag"]
    made = build.rewritten(raw, scratch_tag, held["epoch"], labels)
    if made == held["digest"]:
        engine.run_quiet(["tag", made, same], "docker tag")
        engine.remove_quiet(scratch_tag)
        return made, same, held
    return made, scratch_tag, held
