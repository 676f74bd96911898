"""`kit pull`: a published image as a SIF, for clusters with Apptainer and no Docker.

The SIF is filed per recipe version and variant with the reference it came
from and its own SHA-256, which trial records then carry as the image digest.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from kit.core import inputs, schema
from kit.core.errors import KitError
from kit.core.paths import cache_dir, exclusive, made_whole, sha256_of, write_atomically
from kit.core.proc import stream, which
from kit.image.convert import APPTAINER_FIX, compression, mksquashfs_args
from kit.image.recipes import Recipe


@dataclass(frozen=True)
class Pulled:
    sif: Path
    ref: str
    digest: str


def _path(recipe: Recipe, variant: str) -> Path:
    return cache_dir() / "pulled" / recipe.name / f"{recipe.version}-{variant}.sif"


def pull(recipe: Recipe, variant: str, ref: str) -> Pulled:
    """Build the SIF from ref (a registry reference, or any Apptainer source URI),
    compressed as `kit convert` compresses (KIT_SQUASHFS_COMPRESSION)."""
    fix = "give a registry reference or an Apptainer source URI, e.g. docker://REGISTRY/IMAGE"
    schema.operand("--ref", ref, "apptainer build", fix)
    recipe.check_variant(variant)
    apptainer = which("apptainer", APPTAINER_FIX)
    source = ref if "://" in ref else f"docker://{ref}"
    sif = _path(recipe, variant)
    with exclusive(sif.with_suffix(".lock"), f"the SIF of {recipe.name} {variant}"):
        squash = " ".join(mksquashfs_args(compression()))
        with made_whole(sif) as tmp:
            stream(
                [apptainer, "build", "--force", "--mksquashfs-args", squash, str(tmp), source],
                "apptainer build",
            )
            digest = f"sif-sha256:{sha256_of(tmp)}"
            meta = json.dumps({"ref": source, "digest": digest}) + "\n"
            write_atomically(sif.with_suffix(".json"), meta)
    print(f"pulled {source} -> {sif}")
    return Pulled(sif, source, digest)


def pulled(recipe: Recipe, variant: str) -> Pulled | None:
    """The SIF `kit pull` made for this recipe version and variant, if any."""
    sif = _path(recipe, variant)
    if not sif.is_file():
        return None
    meta = inputs.remade(sif.with_suffix(".json"))
    ref, digest = (meta.get("ref"), meta.get("digest")) if isinstance(meta, dict) else (0, 0)
    if isinstance(ref, str) and isinstance(digest, str) and digest.startswith("sif-sha256:"):
        return Pulled(sif, ref, digest)
    raise KitError(
        f"the pulled {sif} has no readable metadata ({sif.with_suffix('.json').name}); "
        f"pull it again: kit pull {recipe.name} --ref REF"
    )
