#!/usr/bin/env bash
# One-command GPU verification for tfparity; degrades to the CPU when no GPU is usable.
#
#   scripts/gpu_check.sh [LOG]            (default LOG: gpu_check.log)
#
# Installs what it needs into a fresh virtualenv (.gpu-venv): PyTorch first, then
# TensorFlow with its CUDA libraries (tensorflow[and-cuda]) when nvidia-smi exists,
# falling back to plain TensorFlow, then tfparity with all extras. Then it runs
# `tfparity devices`, `tfparity check MODEL --device gpu` (cpu when TF sees no GPU),
# `tfparity crosscheck MODEL --precision bf16`, `tfparity modes MODEL --devices all`, and
# scripts/throughput.py (batch 64, seq 128; eager and --graph),
# and writes everything, with a summary of exit codes, to LOG.
#
# Environment:
#   VENV=path   reuse this virtualenv instead of creating one (nothing is installed)
#   QUICK=1     a quick run: MODEL=tiny:bert, BATCH=8, SEQ=16, REPEATS=1
#   MODEL, BATCH, SEQ, REPEATS   override the sizes (defaults minilm, 64, 128, 3)
set -uo pipefail
cd "$(dirname "$0")/.."

LOG=${1:-gpu_check.log}
if [ "${QUICK:-0}" = "1" ]; then
    MODEL=${MODEL:-tiny:bert} BATCH=${BATCH:-8} SEQ=${SEQ:-16} REPEATS=${REPEATS:-1}
else
    MODEL=${MODEL:-minilm} BATCH=${BATCH:-64} SEQ=${SEQ:-128} REPEATS=${REPEATS:-3}
fi
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

SUMMARY=()
step() {  # step NAME COMMAND...: run, log, remember the exit code
    local name=$1
    shift
    echo
    echo "===== $name: $*"
    local start=$SECONDS
    "$@"
    local rc=$?
    echo "===== $name: exit $rc ($((SECONDS - start)) s)"
    SUMMARY+=("$(printf '%-22s exit %-3s %5s s' "$name" "$rc" "$((SECONDS - start))")")
    return 0
}

echo "tfparity GPU check · $(date -u '+%Y-%m-%d %H:%M:%S UTC') · model $MODEL, batch $BATCH, seq $SEQ"
if command -v nvidia-smi >/dev/null 2>&1; then
    HAVE_NVIDIA=1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
else
    HAVE_NVIDIA=0
    echo "nvidia-smi not found: no NVIDIA GPU here, everything runs on the CPU"
fi

install() {
    python3 -m venv .gpu-venv && . .gpu-venv/bin/activate || return 1
    python -m pip install -q --upgrade pip
    pip install -q torch==2.13.0 || return 1
    if [ "$HAVE_NVIDIA" = "1" ]; then
        pip install -q "tensorflow[and-cuda]" \
            || echo "tensorflow[and-cuda] failed to install; falling back to plain tensorflow"
    fi
    pip install -q -e ".[all]"
}

if [ -n "${VENV:-}" ]; then
    echo "reusing the virtualenv $VENV (nothing installed)"
    # shellcheck disable=SC1091
    . "$VENV/bin/activate" || { echo "cannot activate $VENV"; exit 2; }
else
    step install install
    # shellcheck disable=SC1091
    . .gpu-venv/bin/activate || { echo "the install failed; see above"; exit 2; }
fi

python -c "import tensorflow as tf, transformers; print('tensorflow', tf.__version__, '· transformers', transformers.__version__)" 2>/dev/null
GPUS=$(python -c "from tfparity.adapters.devices import list_devices
print(sum(d.device_type == 'GPU' for d in list_devices().devices))" 2>/dev/null || echo 0)
if [ "$GPUS" -gt 0 ] 2>/dev/null; then
    DEVICE=gpu
    echo "TensorFlow sees $GPUS GPU(s)"
else
    DEVICE=cpu
    echo "TensorFlow sees no GPU: the checks run on the CPU (--device cpu)"
fi

step devices tfparity devices
step "check --device $DEVICE" tfparity check "$MODEL" --device "$DEVICE"
step "check --xla" tfparity check "$MODEL" --device "$DEVICE" --xla
step "crosscheck bf16" tfparity crosscheck "$MODEL" --device "$DEVICE" --precision bf16 --no-reload
step "modes --devices all" tfparity modes "$MODEL" --devices all
step throughput python scripts/throughput.py --model "$MODEL" --batch "$BATCH" --seq "$SEQ" \
    --repeats "$REPEATS" --device "$DEVICE"
step "throughput graph" python scripts/throughput.py --model "$MODEL" --batch "$BATCH" \
    --seq "$SEQ" --repeats "$REPEATS" --device "$DEVICE" --graph

echo
echo "===== summary (model $MODEL, device $DEVICE, $GPUS GPU(s) visible to TensorFlow)"
printf '%s\n' "${SUMMARY[@]}"
grep -E "^(PASS|FAIL) |sentences/s|not available" "$LOG" | sed 's/^/  /'
echo "log: $LOG"
FAILED=$(printf '%s\n' "${SUMMARY[@]}" | grep -vc " exit 0 " || true)
exit $((FAILED > 0 ? 1 : 0))
