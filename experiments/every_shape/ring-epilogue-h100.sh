# Step 12 staging D in its pipeline's ring (ring_epilogue/: one more stage where each cluster has one tile), against
# its own plan and cuBLAS at 256 tokens, one interleaved run per shape; on an H100. Results: h100-ring-epilogue/.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 experiments/every_shape/ring_epilogue/make_variant.py
run() {  # shapes plans name
  timeout 140 python3 experiments/every_shape/check_and_time.py --impl experiments/every_shape/ring_epilogue \
      --steps 12 --shapes $1 --plans $2 --json $OUT/re-$3.json >> $OUT/re.log 2>&1 || echo "  rc=$? at $1" >> $OUT/re.log
}
run 256x4608x3584 dp80e a
run 256x4096x4096,256x3584x3584 dp64e b
run 256x6144x4096 dp96e c
grep -E "cublas|passed': False|rc=" $OUT/re.log
