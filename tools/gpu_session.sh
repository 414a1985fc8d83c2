#!/usr/bin/env bash
# Everything that needs the GPU, in one pass (the lent H200 is scarce): build the CUDA variant, run the
# op tests, run the CUDA tests under compute-sanitizer memcheck, benchmark, profile with Nsight Compute.
# Logs and results go to $OUT (default ./gpu-out). Each step runs even if an earlier one failed.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
status=0
STEPS=${STEPS:-build tests memcheck bench ncu conda repro}
step() {
  local name=$1
  shift
  [[ " $STEPS " == *" $name "* ]] || return 0
  local start=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc ($((SECONDS - start)) s)"
  tail -n "${TAIL:-6}" "$OUT/$name.log"
  [ $rc -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

step build $PY -m tools.build_op --out build/gpu/img2gray --cuda on
export PYTHONPATH=$PWD/build/gpu${PYTHONPATH:+:$PYTHONPATH}
step tests $PY -m pytest -q -p no:logging -p no:cacheprovider tests/op
step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 \
  $PY -m pytest -q -p no:logging -p no:cacheprovider tests/op -k "cuda and not compile"
TAIL=40 step bench $PY benchmarks/bench_op.py --device cuda --json "$OUT/bench-h200.json"
TAIL=40 step ncu ncu --clock-control none --kernel-name regex:"planar_packets|interleaved_packets|per_pixel" \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \
  $PY benchmarks/bench_op.py --device cuda --ncu
# The CUDA conda package through the recipe (offline stand-ins for this machine's toolchain), installed into
# a fresh prefix, where the package's own GPU check runs.
conda_package() {
  $PY -m tools.conda.build --offline --output-dir output &&
    $PY -m tools.conda.install --offline --prefix /tmp/img2gray-env &&
    /tmp/img2gray-env/bin/python recipe/check_img2gray.py &&
    mkdir -p "$OUT/linux-64" && cp output/linux-64/*.conda "$OUT/linux-64/"
}
TAIL=12 step conda conda_package
# Bit-reproducibility of the CUDA build: one commit from two checkout paths, sha256 of library + metadata.json.
TAIL=12 step repro $PY -m tools.repro_check --cuda on
exit $status
