#!/usr/bin/env python3
"""The image build matrix for .github/workflows/images.yml, made from `kit list --json`
so the recipes stay the only list of images. Prints `include=<json>` for $GITHUB_OUTPUT."""

import json
import subprocess
import sys


def matrix(listing: list[dict]) -> list[dict]:
    """One entry per image and variant, with what the build job needs to name things."""
    return [
        {
            "image": r["name"],
            "variant": v,
            "version": r["version"],
            "distro": r["distro"],
            "tag": r["tags"][v],
        }
        for r in listing
        for v in r["variants"]
    ]


def main() -> int:
    listing = json.loads(
        subprocess.run(["kit", "list", "--json"], capture_output=True, text=True, check=True).stdout
    )
    print("include=" + json.dumps(matrix(listing), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
