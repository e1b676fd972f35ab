# Step 12 in clusters of 2 x 2 CTAs (each operand multicast to the two CTAs that share it; cluster2x2/), against
# its own plan and cuBLAS at 256 tokens, one interleaved run per shape; on an H100. Results: h100-cluster2x2/.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 experiments/every_shape/cluster2x2/make_variant.py
run() {  # shapes plans name
  timeout 140 python3 experiments/every_shape/check_and_time.py --impl experiments/every_shape/cluster2x2 --steps 12 \
      --shapes $1 --plans $2 --json $OUT/q-$3.json >> $OUT/q.log 2>&1 || echo "  rc=$? at $1" >> $OUT/q.log
}
run 256x4608x3584 dp80q a
run 256x4096x4096 dp80q b
run 256x3584x3584 dp64q c
run 256x6144x4096 dp112q d
grep -E "cublas|passed': False|rc=" $OUT/q.log
