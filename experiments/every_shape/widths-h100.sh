# Tile widths in multiples of 16 (step 12's TILE_WIDTHS 32..256): on an H100, after ../shared/device/README.md's setup,
# step 12 graded at every correctness shape, then its own plan against the plans of the 64/128/256 widths (and the
# neighbours of its choice), each shape one interleaved run with cuBLAS (check_and_time.py).
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 200 python3 -m grader --step 12 --impl solutions --track hopper --seed 7 --json $OUT/grade-12.json \
    > $OUT/grade-12.log 2>&1
echo "grade step 12 rc=$?"; tail -3 $OUT/grade-12.log
run() {  # shapes plans
  timeout 150 python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $1 --plans $2 \
      --json $OUT/widths-$3.json >> $OUT/widths.log 2>&1 || echo "  rc=$? at $1" >> $OUT/widths.log
}
run 256x4608x3584,256x6144x4096 dp128,dp80,dp96 a
run 128x4608x3584,128x6144x4096 dp64c1,dp48c1,dp32c1 b
run 128x3584x3584,128x4096x4096 sk64c1,dp32c1,dp48c1 c
run 128x28672x4096,256x37888x3584 dp256c1,dp224c1,dp128,dp192 d
run 1000x6144x4096,4096x4096x4096 dp128,dp192,dp256,sk256 e
run 8192x8192x8192 dp256,dp224 f
grep -E "cublas|passed': False|rc=" $OUT/widths.log
