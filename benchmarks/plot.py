"""Bar charts of benchmark results: effective bandwidth as % of a same-size copy, per case and library.

    python benchmarks/plot.py benchmarks/results/h200/bench.json benchmarks/results/cpu/bench.json

Writes `<result>.png` next to each JSON file (needs matplotlib) and prints the GPU results as the markdown table
of benchmarks/README.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot(path: Path) -> Path:
    results = json.loads(path.read_text())
    rows = [row for row in results["rows"] if "copy_ms" in row]
    libraries = list(dict.fromkeys(peer for row in rows for peer in row["results"]))
    figure, axes = plt.subplots(figsize=(12, 0.55 * len(rows) * len(libraries) / 3 + 2))
    height = 0.8 / len(libraries)
    for index, library in enumerate(libraries):
        values = [100 * row["copy_ms"] / row["results"][library] if row["results"].get(library) else 0 for row in rows]
        positions = [r + index * height for r in range(len(rows))]
        axes.barh(positions, values, height=height, label=library)
    axes.set_yticks([r + 0.4 - height / 2 for r in range(len(rows))], [row["case"] for row in rows])
    axes.invert_yaxis()
    axes.axvline(100, color="black", linewidth=0.8)
    axes.set_xlabel("effective bandwidth, % of a copy moving the same bytes (higher is better)")
    environment = results["environment"]
    axes.set_title(f"img2gray vs peers on {environment['device']} (torch {environment['torch']})")
    axes.legend(loc="lower right")
    figure.tight_layout()
    target = path.with_suffix(".png")
    figure.savefig(target, dpi=110)
    return target


GPU_COLUMNS = ("img2gray", "img2gray (new output)", "torch.compile", "torchvision", "torch eager")


def duration(ms: float) -> str:
    return f"{ms * 1e3:.1f} µs" if ms < 0.1 else f"{ms:.3f} ms"


def gpu_table(path: Path) -> str:
    """The README table of a bench_op GPU result: time and % of copy per library, and the paired difference of
    img2gray (new output) against torch.compile."""
    rows = [row for row in json.loads(path.read_text())["rows"] if "copy_ms" in row]
    lines = [
        (
            "| input | copy | **img2gray, out=** | **img2gray, new output** | torch.compile | torchvision | torch eager "
            "| new output - torch.compile, paired |"
        ),
        "|---" * 8 + "|",
    ]
    for row in rows:
        cells = [row["case"], duration(row["copy_ms"])]
        for library in GPU_COLUMNS:
            ms = row["results"].get(library)
            cell = f"{duration(ms)} ({100 * row['copy_ms'] / ms:.1f}%)" if ms else "-"
            cells.append(f"**{cell}**" if library.startswith("img2gray") else cell)
        paired = row.get("vs_torch_compile_ns", {}).get("img2gray (new output)")
        cells.append(f"{paired['mean']:+.0f} ± {paired['standard_error']:.0f} ns" if paired else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        print(plot(Path(argument)))
        if any("torch.compile" in row.get("results", {}) for row in json.loads(Path(argument).read_text())["rows"]):
            print(gpu_table(Path(argument)))
