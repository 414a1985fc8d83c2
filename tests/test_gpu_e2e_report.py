"""testkit/gpu_e2e.py's last line says what ran: "GPU E2E" only when a GPU ran the loop."""

from __future__ import annotations

from testkit.gpu_e2e import summary_line

CPU_PASS = {
    "device": "cpu",
    "result": "PASS",
    "variant": "torch213-cxx11-cpu-x86_64-linux",
    "torch": "2.13.0+cpu",
    "backend": {"type": "cpu"},
    "op": {"device": "cpu", "mismatches": 0},
}


def test_a_cpu_run_does_not_say_gpu():
    # Failed before: `--device cpu` printed "GPU E2E PASS: ... on cpu (capability None)".
    line = summary_line(CPU_PASS)
    assert line.startswith("E2E on CPU (the release loop with the CPU variant; no GPU was used) PASS: ")
    assert "GPU E2E" not in line and "None" not in line


def test_a_gpu_run_names_the_gpu():
    report = {
        **CPU_PASS,
        "device": "cuda",
        "gpu": "NVIDIA H200",
        "capability": "9.0",
        "variant": "torch211-cxx11-cu130-x86_64-linux",
        "backend": {"type": "cuda", "archs": ["9.0"]},
        "op": {"device": "cuda:0", "mismatches": 0},
    }
    assert summary_line(report).startswith(
        "GPU E2E PASS: torch211-cxx11-cu130-x86_64-linux on NVIDIA H200 (capability 9.0)"
    )
    assert summary_line({**report, "result": "FAIL: load: boom"}) == "GPU E2E FAIL: load: boom"
