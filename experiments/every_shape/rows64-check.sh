# Step 12 with 64-row CTA tiles at M <= 128 and the DRAM term in its cost: graded at every correctness shape, then
# its own plan against the plans it replaced, one interleaved run per shape with cuBLAS; on an H100.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 200 python3 -m grader --step 12 --impl solutions --track hopper --seed 7 --json $OUT/grade-12.json \
    > $OUT/grade-12.log 2>&1
echo "grade step 12 rc=$?"; tail -3 $OUT/grade-12.log
timeout 250 python3 experiments/every_shape/check_and_time.py --steps 12 --shapes \
    256x4096x14336,256x3584x18944,128x4096x14336,128x3584x3584 --plans sk128,sk128c1,dp32c1 --json $OUT/own.json \
    > $OUT/own.log 2>&1
grep -E "cublas|passed': False" $OUT/own.log
