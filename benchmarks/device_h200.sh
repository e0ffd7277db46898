#!/usr/bin/env bash
# The GPU-machine checks, as one script (see README "Benchmarks"): the torch GPU table and the
# worker speed-up on 16 cores.  Needs pyscipopt as a wheel in .whl/ when the machine lacks it.
# Writes into $OUT (default: benchmarks/results).
set -u
OUT=${OUT:-benchmarks/results}
export PYTHONUNBUFFERED=1
if ! python3 -c "import pyscipopt" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
python3 -c "import numba, numpy, torch, pyscipopt; print('numba', numba.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'pyscipopt', pyscipopt.__version__)"
# torch alone (SKIP_WORKERS=1) gets the time the GPT-2 compile rows need (about 120 s per compile)
if [ "${SKIP_WORKERS:-0}" = 1 ]; then TG_S=${TORCH_GPU_S:-480}; TG_MAX=${TORCH_GPU_MAX:-420}
else TG_S=${TORCH_GPU_S:-280}; TG_MAX=${TORCH_GPU_MAX:-220}; fi
[ "${SKIP_TORCH:-0}" = 1 ] || \
  timeout 60 python3 -m benchmarks.torch_checkpoint_call --device cuda --out "$OUT" 2>&1 | tail -4
[ "${SKIP_TORCH:-0}" = 1 ] || \
  timeout "$TG_S" python3 -m benchmarks.torch_gpu --out "$OUT" --max-seconds "$TG_MAX" 2>&1 | tee "$OUT/torch_gpu.log"
# CompilePartitioner(offload=True): budgets below keep/recompute's lowest, measured max_memory_allocated (SKIP_OFFLOAD=1 skips)
[ "${SKIP_OFFLOAD:-0}" = 1 ] || \
  timeout "${OFFLOAD_S:-300}" python3 -m benchmarks.torch_compile_offload --out "$OUT" 2>&1 | tee "$OUT/torch_compile_offload.log"
# the zoo (transformers / timm models against their own checkpointing) when asked: ZOO=1 (needs both packages)
[ "${ZOO:-0}" = 1 ] && \
  timeout "${ZOO_S:-300}" python3 -m benchmarks.torch_zoo --device cuda --rounds 11 --out "$OUT" 2>&1 | tee "$OUT/torch_zoo.log"
[ "${SKIP_WORKERS:-0}" = 1 ] || \
  timeout "${WORKERS_S:-200}" python3 -m benchmarks.workers --workers 1,4,16 --limit 10 --out workers_h200 2>&1 | tee "$OUT/workers_h200.log"
cp benchmarks/results/workers_h200.* "$OUT/" 2>/dev/null
ls -la "$OUT"
