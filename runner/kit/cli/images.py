"""The image stage's commands: kit list, render, base, build, convert, pull, import and
cache, each its parser and what it calls."""

import argparse
import sys
from pathlib import Path

from kit.core import jsonout
from kit.core.errors import EXIT_FAILED, Failed, KitError
from kit.core.log import logger

log = logger(__name__)

BUILDS = ("docker", "apptainer")  # what kit import --build builds with


def cmd_list(a: argparse.Namespace) -> None:
    from kit.image import catalog

    listed = catalog.rows()
    if a.json:
        sys.stdout.write(jsonout.dumps(listed))
    else:
        print(catalog.table(listed, catalog.sizes()))


def _selected(names: list[str]) -> list:
    from kit.image import recipes

    return [recipes.load(n) for n in names] if names else list(recipes.load_all().values())


def cmd_render(a: argparse.Namespace) -> None:
    from kit.image import render

    chosen = _selected(a.images)
    if a.check:
        render.check(chosen)
        if a.json:
            sys.stdout.write(jsonout.dumps({"images": [r.name for r in chosen], "written": []}))
        else:
            print(f"containers/ matches recipes/ ({len(chosen)} images)")
        return
    written = render.write(chosen)
    if a.json:
        sys.stdout.write(jsonout.dumps({"images": [r.name for r in chosen], "written": written}))
        return
    for p in written:
        print(f"wrote {p}")
    if not written:
        print("containers/ already up to date")


def cmd_base(a: argparse.Namespace) -> None:
    from kit.image import debian_base

    debian_base.make(a.suite, a.mirror, a.force)


def cmd_build(a: argparse.Namespace) -> None:
    from kit.image import build, convert, recipes

    r = recipes.load(a.image)
    formats = convert.parse_formats(a.to) if a.to else []
    if a.from_bundle is not None:
        _from_bundle(a)
    else:
        opts = build.Options(a.ca_cert, a.no_cache, tuple(a.cache_from), a.locked)
        build.build(r, a.variant, opts)
    if formats:
        convert.convert(r, a.variant, formats)


def _from_bundle(a: argparse.Namespace) -> None:
    import time

    from kit.image import bundle

    t0 = time.monotonic()
    made, tag, held = bundle.rebuild(a.image, a.variant, a.from_bundle)
    took = f"in {time.monotonic() - t0:.0f} s"
    if made != held["digest"]:
        raise Failed(
            f"the bundle's rebuild is {made[:19]}, not {held['digest'][:19]} as {a.from_bundle} "
            f"names ({took}); kept as {tag}: see what differs with "
            f"kit verify {a.image} --against {tag}"
        )
    print(f"rebuilt {tag} from {a.from_bundle} with the network off {took}: {made[:19]}, "
          "the digest the bundle names (reproduced)")  # fmt: skip


def cmd_bundle(a: argparse.Namespace) -> None:
    from kit.core.paths import size_of
    from kit.image import bundle, recipes

    held = bundle.make(recipes.load(a.image), a.variant, a.out)
    size = size_of(a.out)
    if a.json:
        sys.stdout.write(jsonout.dumps({**held, "size_bytes": size, "folder": str(a.out)}))
        return
    print(
        f"wrote {a.out}: {held['tag']} ({held['digest'][:19]}), {len(held['files'])} files, "
        f"{size / 1e9:.2f} GB, in {held['seconds']} s; rebuild it with no network by "
        f"kit build {held['recipe']} --from-bundle {a.out}"
    )


def cmd_lock(a: argparse.Namespace) -> None:
    import time

    from kit.image import build, lock, recipes
    from kit.image.blocks import APT_LIST

    t0 = time.monotonic()
    r = recipes.load(a.image)
    r.check_variant(a.variant)
    r = r.for_variant(a.variant)
    tag = build.build(r, a.variant, build.Options(a.ca_cert, held=False))  # a lock anew
    held = lock.make(r, a.variant, build.read_file(tag, APT_LIST))
    target = lock.write(r, a.variant, held)
    print(
        f"wrote {target}: {len(held['apt'])} apt packages, {len(held['pip'])} pip "
        f"distributions of {tag}, in {time.monotonic() - t0:.0f} s"
    )


def cmd_verify(a: argparse.Namespace) -> None:
    from kit.core.paths import sha256_of
    from kit.image import build, convert, engine, lock, recipes, verify

    if a.image.endswith(".sif"):
        given = Path(a.image)
        labels = verify.sif_labels(given)
        r = recipes.load(labels.get("kit.recipe", "?"))
        variant = labels.get("kit.variant", a.variant)
        if labels.get("kit.recipe.version") != r.version:
            raise KitError(
                f"'{given}' is {r.name} {labels.get('kit.recipe.version')}, this checkout "
                f"makes {r.version}; check out the kit that made that version"
            )
        r = r.for_variant(variant)
        build.build(r, variant, build.Options(a.ca_cert))
        art = convert.convert(r, variant, ["singularity"])
        verdict = verify.compare_sif(given, art.sif, r.tag(variant))
        how = f"{art.sif}, made from {r.tag(variant)}"
    else:
        r = recipes.load(a.image)
        r.check_variant(a.variant)
        r = r.for_variant(a.variant)
        variant = a.variant
        if a.against:
            other, how = a.against, a.against
        else:
            other = f"kit-verify/{r.name}:{r.version}-{variant}"
            how = "a rebuild with no cache"
            log.info(f"building {r.tag(variant)} again with no cache, as {other}")
            build.make(r, variant, build.Options(a.ca_cert, no_cache=True), other)
        verdict = verify.compare(r.tag(variant), other)
        held = lock.path(r)
        locked = sha256_of(held) if held.is_file() else None
        verify.record(convert.artifacts(r, variant).manifest, verdict, how, locked)
        if verdict.reproduced and not a.against:  # the same image: its second tag goes
            engine.remove_quiet(other)
    if a.json:
        sys.stdout.write(jsonout.dumps(verdict.as_json()))
    else:
        print("\n".join(verify.lines(verdict, None if a.all else 20)))
    if not verdict.reproduced:
        raise SystemExit(EXIT_FAILED)


def cmd_normalize(a: argparse.Namespace) -> None:
    import time

    from kit.image import normalize, sif

    source, out = Path(a.sif), Path(a.out)
    if not source.is_file():
        raise KitError(f"'{source}' is not a file; give the SIF apptainer build made")
    if out.resolve() == source.resolve():
        raise KitError(f"--out '{out}' is the SIF it reads; give another path")
    if not out.parent.is_dir():
        raise KitError(f"--out '{out}': folder '{out.parent}' does not exist; create it first")
    t0 = time.monotonic()
    epoch = normalize.rewrite(source, out)
    made = {"source": str(source), "out": str(out), "epoch": epoch, "digest": sif.digest(out)}
    if a.json:
        sys.stdout.write(jsonout.dumps(made))
    else:
        print(
            f"wrote {out} ({made['digest'][:19]} less the SIF header's ID and dates), every "
            f"date at most {epoch}, in {time.monotonic() - t0:.0f} s"
        )


def cmd_convert(a: argparse.Namespace) -> None:
    from kit.image import convert, recipes

    r = recipes.load(a.image)
    formats = convert.parse_formats(a.to)
    art = convert.convert(r, a.variant, formats)
    if a.json:
        made = {f: p for f, p in art.products.items() if f in formats}
        said = {"image": r.name, "digest": art.digest, "folder": art.dir, "products": made}
        sys.stdout.write(jsonout.dumps(said))
    else:
        print(art.dir)


def cmd_import(a: argparse.Namespace) -> None:
    from kit.image import importer

    if a.build not in (None, *BUILDS):
        raise KitError(f"--build '{a.build}' must be {' or '.join(BUILDS)}")
    done = importer.write(a.dockerfile, a.name, a.out, a.base)
    if not a.json:
        print(f"wrote {done.definition} (from {done.base})")
        for line in done.untranslated:
            print(f"  not translated: {line}")
    built = importer.build(done, a.build) if a.build else None
    if a.json:
        said = {"definition": done.definition, "base": done.base, "built": built}
        sys.stdout.write(jsonout.dumps(said | {"untranslated": done.untranslated}))
    elif built:
        print(f"built: kit run --image {built} --command ...")


def cmd_pull(a: argparse.Namespace) -> None:
    from kit.image import pull, recipes

    pull.pull(recipes.load(a.image), a.variant, a.ref)


def cmd_cache(a: argparse.Namespace) -> None:
    from kit.image import cache, engine

    if a.cache_command == "ls":
        ids = engine.image_ids()
        print(cache.listing_json(ids) if a.json else cache.listing(ids))
    elif a.json:
        rules = cache.Rules.of(a.keep_last, a.older_than, a.max_size)
        sys.stdout.write(jsonout.dumps(cache.pruned(rules, a.dry_run).as_json()))
    else:
        print(cache.prune(cache.Rules.of(a.keep_last, a.older_than, a.max_size), a.dry_run))


def add_list(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("list", help="images, versions, MPI flavour, frameworks, variants")
    jsonout.add_option(s)
    s.set_defaults(func=cmd_list)


def add_render(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("render", help="write containers/ from recipes/ (or --check drift)")
    s.add_argument("images", nargs="*", metavar="IMAGE", help="default: every recipe")
    s.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail if containers/ differs from recipes/",
    )
    jsonout.add_option(s)
    s.set_defaults(func=cmd_render)


def add_base(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "base", help="make the local Debian base image, reproducibly (mmdebstrap, as root)"
    )
    s.add_argument("--suite", default="bookworm", help="Debian suite (default: bookworm)")
    s.add_argument("--mirror", help="Debian mirror (default: the host's apt source)")
    s.add_argument("--force", action="store_true", help="remake it even if it exists")
    s.set_defaults(func=cmd_base)


def add_build(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "build",
        help="docker build an image from its rendered recipe",
        description="docker build IMAGE from its rendered recipe and write it in reproducible "
        "form (the same inputs give the same digest). Debian's packages come from the "
        "mirror the base image names, or, where the recipe names a debian_snapshot and "
        "KIT_DEBIAN_SNAPSHOT names a snapshot service, from that time's archive.",
    )
    s.add_argument("image", metavar="IMAGE")
    s.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    s.add_argument(
        "--ca-cert",
        type=Path,
        metavar="FILE",
        help="CA bundle for TLS inside the build (default: the host's bundle)",
    )
    s.add_argument("--no-cache", action="store_true", help="ignore the layer cache")
    s.add_argument(
        "--cache-from",
        action="append",
        default=[],
        metavar="IMAGE",
        help="reuse layers of this earlier build (e.g. one loaded from a CI cache); repeatable",
    )
    s.add_argument(
        "--locked",
        action="store_true",
        help="refuse a recipe version that has no lock too (one that has, in "
        "recipes/IMAGE.lock.json, is always held to it: a locked package gone from the "
        "mirror, or an image holding other packages, is refused before the tag moves)",
    )
    s.add_argument(
        "--from-bundle",
        type=Path,
        metavar="DIR",
        help="build from what 'kit bundle' kept in DIR alone, with the build's network off, "
        "and check the image is the one the bundle names (exit 1 when it is not)",
    )
    s.add_argument(
        "--to",
        metavar="FORMATS",
        help="then convert, as kit convert --to: singularity, shifter, charliecloud, "
        "docker-archive; comma-separated",
    )
    s.set_defaults(func=cmd_build)


def add_bundle(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "bundle",
        help="keep every input of an image's recipe version in a folder, for an offline rebuild",
        description="Write into DIR every input of IMAGE's recipe version, each checked "
        "against recipes/IMAGE.lock.json and named by its SHA-256 in DIR/bundle.json: the "
        "lock's .deb files with their stanzas of the mirror's index, its pip files in a "
        "local index, the base image (docker save), the rendered Dockerfile, benchmarks/, "
        "the host's wheels, the recipe, and kit's version. 'kit build IMAGE --from-bundle "
        "DIR' rebuilds the image from DIR alone with the build's network off. IMAGE must be "
        "built and hold exactly its lock (kit lock IMAGE).",
    )
    s.add_argument("image", metavar="IMAGE")
    s.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    s.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new or empty folder")
    jsonout.add_option(s)
    s.set_defaults(func=cmd_bundle)


def add_lock(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "lock",
        help="write every package of an image with its file's SHA-256 beside its recipe",
        description="Build IMAGE (cached when it is built) and write recipes/IMAGE.lock.json: "
        "every apt package with its version, the .deb's SHA-256 and pool path from the "
        "mirror's index, and every distribution in its venv with the SHA-256 of the wheel "
        "or sdist it was installed from (pip downloads each for the image's Python). "
        "kit build then names any package that differs (and refuses with --locked).",
    )
    s.add_argument("image", metavar="IMAGE")
    _variant_and_ca(s, "the build")
    s.set_defaults(func=cmd_lock)


def _variant_and_ca(s: argparse.ArgumentParser, building: str) -> None:
    """The options of a command that builds a recipe's image as kit build does."""
    s.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    s.add_argument(
        "--ca-cert", type=Path, metavar="FILE", help=f"CA bundle for {building} (as kit build)"
    )


def add_verify(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "verify",
        help="build an image again with no cache and check it is the same, bit for bit",
        description="Build IMAGE's recipe version again from nothing (no layer cache) under "
        "the scratch tag kit-verify/IMAGE:VERSION-VARIANT and compare it with the built "
        "image: the same digest is 'reproduced' (exit 0); otherwise every path that differs "
        "is named with how (present in one only, content, mode, owner, mtime) and every "
        "config field, exit 1. The verdict is kept in the image's manifest. Given a SIF "
        "(FILE.sif), it is compared with the SIF kit makes from the recipe version its "
        "labels name, less the SIF header's ID and dates, which no SIF writer fixes.",
    )
    s.add_argument("image", metavar="IMAGE|FILE.sif")
    _variant_and_ca(s, "the rebuild")
    s.add_argument(
        "--against",
        metavar="REF",
        help="compare with this image in the engine (e.g. one pulled from a registry) "
        "instead of a rebuild",
    )
    s.add_argument("--all", action="store_true", help="list every path that differs")
    jsonout.add_option(s)
    s.set_defaults(func=cmd_verify)


def add_normalize(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "normalize",
        help="write a SIF apptainer built from a kit definition in reproducible form",
        description="apptainer build from a definition stamps the SIF with the build's "
        "time and the base SIF's path, and dates what %%post writes at that moment. This "
        "writes the SIF again with every date clamped to the recipe's epoch (its "
        "kit.source-date-epoch label), those labels and the definition's From: line as "
        "rendered, packed as kit convert packs: one definition built twice with one "
        "Apptainer gives the same bytes, less the SIF header's ID and dates.",
    )
    s.add_argument("sif", metavar="FILE.sif", help="the SIF apptainer build made")
    s.add_argument("--out", required=True, metavar="OUT.sif", help="the SIF to write")
    jsonout.add_option(s)
    s.set_defaults(func=cmd_normalize)


def add_convert(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("convert", help="convert a built image to SIF / Shifter squashfs")
    s.add_argument("image", metavar="IMAGE")
    s.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    s.add_argument(
        "--to",
        required=True,
        metavar="FORMATS",
        help="singularity, shifter (squashfs + metadata + docker-save tar), "
        "charliecloud (same squashfs), docker-archive; comma-separated",
    )
    jsonout.add_option(s)
    s.set_defaults(func=cmd_convert)


def add_pull(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "pull",
        help="fetch a published image as a SIF (Apptainer, no Docker needed)",
        description="Build IMAGE's SIF with Apptainer from a published reference; "
        "`kit run --runtime singularity` then uses it when there is no local Docker image.",
    )
    s.add_argument("image", metavar="IMAGE")
    s.add_argument(
        "--ref",
        required=True,
        help="registry reference (REGISTRY/OWNER/kit-IMAGE:VERSION-VARIANT) or Apptainer "
        "source URI (docker://…, docker-archive://…, oras://…)",
    )
    s.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    s.set_defaults(func=cmd_pull)


def add_import(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "import",
        help="your Dockerfile as an Apptainer definition too (spython), built either way",
        description="Write NAME.def from a Dockerfile with spython's converter, listing what "
        "has no Apptainer equivalent (USER, SHELL, HEALTHCHECK, ...), so a site without "
        "Docker builds the same image; then kit run --image measures it.",
    )
    s.add_argument("dockerfile", type=Path, metavar="DOCKERFILE")
    s.add_argument("--name", required=True, help="the image's name (lower case), e.g. train")
    s.add_argument("--out", type=Path, help="folder for NAME.def (default: the Dockerfile's)")
    s.add_argument(
        "--base",
        metavar="FILE",
        help="bootstrap the definition from this local SIF or docker save archive instead "
        "of pulling the Dockerfile's FROM image from its registry",
    )
    s.add_argument(
        "--build",
        metavar="{" + ",".join(BUILDS) + "}",
        help="then build it: docker (tag NAME in the local engine) or apptainer (NAME.sif "
        "beside the definition, as the caller)",
    )
    jsonout.add_option(s)
    s.set_defaults(func=cmd_import)


def add_cache(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "cache",
        help="the converted images kit keeps (SIF, squashfs, tar): list them, prune them",
        description="Each image digest kit converted has a folder in the cache (KIT_CACHE) "
        "holding its products; a folder a running campaign or conversion uses is never "
        "removed.",
    )
    s.set_defaults(func=cmd_cache)  # one function a subcommand: it reads cache_command
    cache = s.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    ls = cache.add_parser(
        "ls",
        help="each image folder: products and sizes, last use, whether in use or still in "
        "the engine",
        description="Each image folder, least recently used first (what prune removes "
        "first): its products and their sizes, when a campaign or conversion last used it, "
        "whether a running kit uses it now, and whether the engine still holds the image.",
    )
    jsonout.add_option(ls)
    prune = cache.add_parser(
        "prune",
        help="remove image folders, least recently used first, until the rules hold",
        description="Remove whole image folders, least recently used first, until every "
        "rule given holds; a folder a running kit uses is kept (and said). Prints what it "
        "removed and the space freed.",
    )
    prune.add_argument(
        "--keep-last", type=int, metavar="N", help="at most N folders remain (the most recent)"
    )
    prune.add_argument(
        "--older-than", metavar="AGE", help="remove folders unused for longer, e.g. 30d, 12h"
    )
    prune.add_argument(
        "--max-size", metavar="SIZE", help="at most this much in all, e.g. 20G, 500M, 1.5T"
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    jsonout.add_option(prune)
