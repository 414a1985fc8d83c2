"""Convert an RGB image to grayscale with img2gray and write it next to the input.

    python examples/demo.py [IMAGE] [--device cpu|cuda]

Writes `<name>.gray.png` beside IMAGE and prints how it compares with OpenCV when that is installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import img2gray

DEFAULT_IMAGE = Path(__file__).with_name("chelsea.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", nargs="?", type=Path, default=DEFAULT_IMAGE)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"error: --device {args.device}: this torch ({torch.__version__}) sees no CUDA GPU; use --device cpu")
    try:
        rgb = np.asarray(Image.open(args.image).convert("RGB")).copy()  # (H, W, 3) uint8, as decoders give it
    except (OSError, Image.DecompressionBombError) as error:  # missing, unreadable, not an image
        sys.exit(f"error: {args.image}: cannot read it as an image ({error.__class__.__name__}: {error})")
    gray = img2gray.img2gray(torch.from_numpy(rgb).to(args.device), dim=-1, keepdim=False).cpu().numpy()
    target = args.image.with_name(f"{args.image.stem}.gray.png")
    Image.fromarray(gray, mode="L").save(target)

    build = img2gray.metadata()
    # "semver": the release version; metadata.json's "version" is its major (the `kernels` format).
    print(f"img2gray {build['semver']} ({build['variant']}) on {args.device}: {args.image} {rgb.shape} -> {target}")
    try:
        import cv2
    except ImportError:
        return
    difference = np.abs(gray.astype(int) - cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(int))
    print(f"max |img2gray - OpenCV cvtColor| = {difference.max()} (pixels differing: {np.count_nonzero(difference)})")


if __name__ == "__main__":
    main()
