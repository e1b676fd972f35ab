# Clusters of one CTA against step 12's pairs where M is large (issue 27 found step 10's code faster without the
# cluster launch at 2048^3 on an H100: 1.004x against 0.954x), stream-K at 4096^3 (3.88 waves of 256-wide pairs), and
# stream-K over narrow tiles at 256x4608x3584 (the one model shape under 0.90x); on an H100.
# Results: h100-clusters/ (cl-*.json, cl.log).
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
run() {  # shapes plans name
  timeout 150 python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $1 --plans $2 \
      --json $OUT/cl-$3.json >> $OUT/cl.log 2>&1 || echo "  rc=$? at $1" >> $OUT/cl.log
}
run 2048x2048x2048 dp256c1,sk256c1,dp128c1 a
run 4096x4096x4096 dp256c1,sk256c1,sk256 b
run 8192x4096x1024,1000x4096x4096 dp256c1 c
run 1000x4608x3584 dp144c1,dp128c1 d
run 1000x3584x3584 dp224c1,dp256c1 e
run 256x4608x3584 sk80,sk96,sk112,sk128 f
grep -E "cublas|passed': False|rc=" $OUT/cl.log
