# The bench's Triton disturbance (README.md, "The bench's cuBLAS times are disturbed"): one model-table run with the
# Triton seed under nsys, so that each kernel's own duration can be set beside the CUDA-event time the bench reports.
# Kernel durations as usual while event times grow: a gap inside the timed window (the host late to queue the call);
# kernel durations grown too: the kernel itself ran slower. On an H100; results under $OUT.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
command -v nsys >/dev/null || { echo "nsys is not on this machine"; exit 3; }
nsys profile --trace cuda --output $OUT/bench256 --force-overwrite true \
    python3 -m grader.commands.bench --table models --tokens 256 --out $OUT/b256 > $OUT/bench.log 2>&1
nsys stats --report cuda_gpu_trace --format csv --output $OUT/trace $OUT/bench256.nsys-rep > /dev/null
grep -E "\| 12 \|" $OUT/b256.md
