#!/usr/bin/env bash
# The stable-ABI build on a GPU machine, in one pass: build it and the exact build beside it for the machine's GPU,
# the ABI gate (stable-ABI rule included), tests/op and compute-sanitizer memcheck over the CUDA tests with each
# build, single calls of both builds against torch.compile and a same-bytes copy, host time included and inside
# CUDA graphs (benchmarks/single_calls.py), small-call latency against the exact build in one process (each build
# owning the public name once), testkit.gpu_e2e --abi stable (release into a local Hub, kernels.get_kernel and
# kernelpin.load), and kernelpin's torch-free machine detection (the CUDA driver's compute capability) against the
# running torch's (tests/kernelpin/toplevel/test_detect_installed.py, with e2e). Logs and results go to $OUT; wheels for the
# gate and testkit.gpu_e2e are installed from .whl/ when present (docs/releasing.md).
# Every step runs even if an earlier one failed. Last, tools/gpu/record.py writes the steps' outcome into $OUT/verification.md (docs/verification.md with this script's section replaced: copy it there;
# COMMIT=REV names the commit where the checkout has no git; RECORD_INTO=FILE writes it there instead, updating
# what an earlier run wrote there).
#   STEPS="build gate tests memcheck single-calls latency e2e"   (the default; a subset runs only those)
#   STEPS=slim   per-capability builds (issue 51), on their own: testkit.gpu_e2e --capability-builds (the exact CUDA
#                variant for SLIM_ARCHS, default 8.0;9.0;10.0+PTX, with one build per capability, released into a
#                local Hub; sync, kernelpin.load and kernelpin.get_kernel must take this GPU's build, its outputs
#                identical to the fat build's), then tests/op and memcheck with that build
#   SINGLE_CALLS_ARGS="--quick"   passed to python -m benchmarks.single_calls
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
STEPS=${STEPS:-build gate tests memcheck single-calls latency e2e}
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
$PY -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" | tee -a "$OUT/gpu.txt"
SITE=/tmp/site
# The gate (kernel-abi-check) and the e2e steps need the wheels.
if [[ -d .whl && ( " $STEPS " == *" gate "* || " $STEPS " == *" e2e"* || " $STEPS " == *" slim"* ) ]]; then
  STEPS="$STEPS wheels" step wheels 120 $PY -m pip install --no-index --target "$SITE" .whl/*.whl &
fi
step build-stable 240 $PY -m tools.builder.op --abi stable --cuda on --out build/gpu-stable/img2gray --build-dir build/obj-stable &
step build-exact 240 $PY -m tools.builder.op --cuda on --out build/gpu-exact/img2gray --build-dir build/obj-exact &
wait
STABLE=$PWD/build/gpu-stable/img2gray
step gate 60 env PYTHONPATH=$SITE:$PWD $PY -m kernelpin.publisher.abi_gate "$STABLE"
EXACT=$PWD/build/gpu-exact/img2gray
TESTS="-m pytest -q -p no:cacheprovider tests/op"
CUDA_TESTS="(cuda or stream or graph) and not compile"
MEMCHECK="compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20"
# Correctness first, all four side by side (none is timed); then the timed steps have the GPU to themselves.
step tests-stable 300 env IMG2GRAY_OP_BUILD="$STABLE" IMG2GRAY_OP_ABI=stable $PY $TESTS &
step tests-exact 300 env IMG2GRAY_OP_BUILD="$EXACT" IMG2GRAY_OP_ABI=exact $PY $TESTS &
step memcheck-stable 300 env IMG2GRAY_OP_BUILD="$STABLE" IMG2GRAY_OP_ABI=stable $MEMCHECK $PY $TESTS -k "$CUDA_TESTS" &
step memcheck-exact 300 env IMG2GRAY_OP_BUILD="$EXACT" IMG2GRAY_OP_ABI=exact $MEMCHECK $PY $TESTS -k "$CUDA_TESTS" &
wait
TAIL=60 step single-calls 240 $PY -m benchmarks.single_calls --exact "$EXACT" --stable "$STABLE" ${SINGLE_CALLS_ARGS:-} \
  --json "$OUT/single-calls.json"
TAIL=12 step latency 60 $PY benchmarks/stable_abi_latency.py --exact "$EXACT" --stable "$STABLE" \
  --device cuda --json "$OUT/latency-exact-first.json"
TAIL=12 step latency-stable-first 60 $PY benchmarks/stable_abi_latency.py --exact "$EXACT" \
  --stable "$STABLE" --device cuda --stable-first --json "$OUT/latency-stable-first.json"
step e2e 180 env PYTHONPATH=$SITE:$PWD PATH=$SITE/bin:$PATH $PY -m testkit.gpu_e2e --abi stable --json "$OUT/e2e.json"
step e2e-environment 180 env PYTHONPATH=$SITE:$PWD $PY -m pytest -q -p no:cacheprovider -rs tests/kernelpin/toplevel/test_detect_installed.py
SLIM=$PWD/build/gpu-slim/slim-op/img2gray  # written by the slim step: a copy of the per-capability build it loaded
TAIL=12 step slim 600 env PYTHONPATH=$SITE:$PWD PATH=$SITE/bin:$PATH TORCH_CUDA_ARCH_LIST="${SLIM_ARCHS:-8.0;9.0;10.0+PTX}" \
  $PY -m testkit.gpu_e2e --capability-builds --workdir build/gpu-slim --json "$OUT/slim-e2e.json"
step slim-tests 300 env IMG2GRAY_OP_BUILD="$SLIM" IMG2GRAY_OP_ABI=exact $PY $TESTS
step slim-memcheck 300 env IMG2GRAY_OP_BUILD="$SLIM" IMG2GRAY_OP_ABI=exact $MEMCHECK $PY $TESTS -k "$CUDA_TESTS"
$PY -m tools.gpu.record "$OUT" --script tools/gpu/stable_abi.sh --write "${RECORD_INTO:-$OUT/verification.md}" \
  ${COMMIT:+--commit "$COMMIT"} || status=1
exit $status
