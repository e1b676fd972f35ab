# CTA tiles of 64 rows whose two consumers split the columns (step 12's `Decomposition.tile_m`, first tried in a
# copy of step 12, now in it): fewer bytes into each SM per output than 128 x w tiles where w is small; on an H100.
# Results: h100-rows64/ (r64-*.json; README.md).
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
IMPL=solutions
run() {  # shapes plans name
  timeout 170 python3 experiments/every_shape/check_and_time.py --impl $IMPL --steps 12 --shapes $1 --plans $2 \
      --json $OUT/r64-$3.json >> $OUT/r64.log 2>&1 || echo "  rc=$? at $1" >> $OUT/r64.log
}
run 128x3584x3584,128x4096x4096 dp64r64c1,dp64r64 a
run 128x4608x3584,128x6144x4096 dp80r64c1,dp96r64c1 b
run 256x4608x3584,256x4096x4096 dp128r64,dp144r64,dp160r64 c
run 128x4096x14336,128x3584x18944 dp64r64c1,dp64r64 d
run 256x4096x14336,256x3584x18944 dp128r64,dp112r64 e
grep -E "cublas|passed': False|rc=" $OUT/r64.log
