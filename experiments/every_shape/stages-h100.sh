# Step 12 with fewer pipeline stages than fit (stages/), against its own plan and cuBLAS at 256 tokens, one
# interleaved run per shape; on an H100. Results: h100-stages/.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 experiments/every_shape/stages/make_variant.py
run() {  # shapes plans name
  timeout 140 python3 experiments/every_shape/check_and_time.py --impl experiments/every_shape/stages --steps 12 \
      --shapes $1 --plans $2 --json $OUT/st-$3.json >> $OUT/st.log 2>&1 || echo "  rc=$? at $1" >> $OUT/st.log
}
run 256x4096x4096 dp64s7,dp64s6,dp64s4 a   # 8 stages fit
run 256x4608x3584 dp80s6,dp80s5,dp80s4 b   # 7 fit
grep -E "cublas|passed': False|rc=" $OUT/st.log
