#!/usr/bin/env bash
# Everything that needs the GPU, in one pass (the lent H200 is scarce): build the CUDA variant, run the
# op tests, run the CUDA tests under compute-sanitizer memcheck, benchmark, profile with Nsight Compute.
# Logs and results go to $OUT (default ./gpu-out). Each step runs even if an earlier one failed. Last,
# tools/gpu/record.py writes the steps' outcome into $OUT/verification.md (docs/verification.md with this run's
# section replaced: copy it there; COMMIT=REV names the commit where the checkout has no git; RECORD_INTO=FILE
# writes it there instead, updating what an earlier run wrote there).
#   STEPS="build tests memcheck bench ncu conda repro"   (default; also: experiment, variants, before; none;
#   `conda` runs conda-stable too, STEPS=conda-stable runs it alone)
#   BEFORE=DIR   a checkout of the code to compare against (step `before`: its build, img2gray-only bench, ncu);
#   BEFORE_OP    its build script, relative to it (default tools/builder/op.py; an older checkout names its own)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-build tests memcheck bench ncu conda repro}
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
# Launch shape, occupancy, waves and DRAM traffic of every img2gray kernel, one launch per bench case.
NCU_METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread,launch__occupancy_limit_registers,\
launch__waves_per_multiprocessor,sm__maximum_warps_per_active_cycle_pct,sm__warps_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active
profile() {  # profile PYTHONPATH-ROOT
  PYTHONPATH=$1 ncu --clock-control none --kernel-name regex:"dense_packets|planar_packets|interleaved_packets|per_pixel" \
    --metrics "$NCU_METRICS" $PY benchmarks/bench_op.py --device cuda --ncu
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

# The comparison build compiles while this one does (independent directories).
if [[ " $STEPS " == *" before "* ]]; then
  # As a script with the checkout on PYTHONPATH, so that an older checkout's own build script runs.
  (cd "$BEFORE" && PYTHONPATH=$BEFORE $PY "${BEFORE_OP:-tools/builder/op.py}" --out "$PWD/build/gpu/img2gray" --cuda on \
    >"$OUT/before-build.log" 2>&1) &
  before_build=$!
fi
step build $PY -m tools.builder.op --out build/gpu/img2gray --cuda on
# The standalone experiments (benchmarks/experiments): nvcc for the H200 with torch's headers (c10's Half/BFloat16).
experiment_nvcc() {
  nvcc -O3 --fmad=false -std=c++20 -arch=sm_90 -Icsrc \
    $($PY -c 'import torch.utils.cpp_extension as c; print(" ".join("-I" + p for p in c.include_paths()))') "$@"
}
frame_shapes() {
  experiment_nvcc benchmarks/experiments/frame_shapes.cu -o build/frame_shapes && build/frame_shapes
}
step experiment frame_shapes
# Planar float variants against the product and torch.compile's Triton kernel, same process; then Nsight
# Compute of each (L2 flushed before every launch, so every candidate starts from the same cache state).
# Run as a step after PYTHONPATH points at build/gpu (the op the variants are timed against).
variants() {
  experiment_nvcc -shared -Xcompiler -fPIC benchmarks/experiments/frame_variants.cu -o build/frame_variants.so &&
    TORCH_LOGS=output_code $PY -m benchmarks.experiments.frame_variants build/frame_variants.so ${VARIANT_ARGS:-} \
      --json "$OUT/variants.json" 2>"$OUT/variants-inductor.log" &&
    ncu --clock-control none --cache-control all --nvtx --print-nvtx-rename kernel \
      --kernel-name regex:"triton|planar_packets|planar_variant|planar_bytes" --csv --metrics "$NCU_METRICS,smsp__inst_executed.sum,launch__block_size" \
      $PY -m benchmarks.experiments.frame_variants build/frame_variants.so ${VARIANT_ARGS:-} --ncu >"$OUT/variants-ncu.csv"
}
if [[ " $STEPS " == *" before "* ]]; then
  wait "$before_build"
  before() {
    PYTHONPATH=$BEFORE/build/gpu $PY benchmarks/bench_op.py --device cuda --no-peers --json "$OUT/bench-before.json" &&
      profile "$BEFORE/build/gpu" >"$OUT/ncu-before.txt" 2>&1
  }
  TAIL=60 step before before
fi
export PYTHONPATH=$PWD/build/gpu${PYTHONPATH:+:$PYTHONPATH}
# Correctness first; the op tests and the memcheck run side by side (neither is timed), then the timed steps
# have the GPU to themselves.
step tests $PY -m pytest -q -p no:logging -p no:cacheprovider tests/op ${TESTS_K:+-k "$TESTS_K"} &
tests_job=$!
step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 \
  $PY -m pytest -q -p no:logging -p no:cacheprovider tests/op -k "(cuda or stream or graph) and not compile" &
memcheck_job=$!
wait $tests_job || status=1
wait $memcheck_job || status=1
TAIL=80 step variants variants
TAIL=60 step bench $PY benchmarks/bench_op.py --device cuda ${BENCH_ARGS:-} --json "$OUT/bench-h200.json"
TAIL=40 step ncu profile "$PWD/build/gpu"
# The CUDA conda packages through the recipe (offline stand-ins for this machine's toolchain), each installed into
# a fresh prefix, where the package's own GPU check runs (PYTHONPATH unset: the op must come from the prefix).
# The exact package (torch_abi exact) first.
conda_package() {
  rm -rf /tmp/img2gray-env &&
    $PY -m tools.conda.build --offline --abi exact --output-dir output &&
    $PY -m tools.conda.install --offline --prefix /tmp/img2gray-env &&
    env -u PYTHONPATH /tmp/img2gray-env/bin/python recipe/check_img2gray.py &&
    mkdir -p "$OUT/linux-64" && cp output/linux-64/*.conda "$OUT/linux-64/"
}
TAIL=12 step conda conda_package
# The stable-ABI package (every torch from 2.11 on); its library must be byte for byte the Hub's stable variant
# of the same commit, `tools.builder.op --abi stable --cuda on` (TORCH_CUDA_ARCH_LIST unset: build.toml's list,
# as the recipe passes it). $OUT/conda-stable-sha256.txt holds both digests.
conda_stable() {
  local channel=build/conda-stable env=/tmp/img2gray-stable-env hub=build/gpu/stable-hub
  rm -rf "$channel" "$env" &&
    $PY -m tools.conda.build --offline --abi stable --output-dir "$channel" &&
    $PY -m tools.conda.install --offline --channel "$channel" --prefix "$env" &&
    env -u PYTHONPATH "$env/bin/python" recipe/check_img2gray.py &&
    env -u TORCH_CUDA_ARCH_LIST $PY -m tools.builder.op --abi stable --cuda on --out "$hub" &&
    sha256sum "$env"/lib/python*/site-packages/img2gray/*.abi3.so "$hub"/*.abi3.so | tee "$OUT/conda-stable-sha256.txt" &&
    [ "$(wc -l <"$OUT/conda-stable-sha256.txt")" -eq 2 ] && [ "$(cut -d' ' -f1 "$OUT/conda-stable-sha256.txt" | sort -u | wc -l)" -eq 1 ] &&
    echo "PASS: the package's library is the Hub stable variant's" &&
    mkdir -p "$OUT/linux-64" && cp "$channel"/linux-64/*.conda "$OUT/linux-64/"
}
TAIL=16 step conda-stable conda_stable
# Bit-reproducibility of the CUDA build: one commit from two checkout paths, sha256 of library + metadata.json.
TAIL=12 step repro $PY -m tools.builder.repro_check --cuda on
$PY -m tools.gpu.record "$OUT" --script tools/gpu/session.sh --write "${RECORD_INTO:-$OUT/verification.md}" \
  ${COMMIT:+--commit "$COMMIT"} || status=1
exit $status
