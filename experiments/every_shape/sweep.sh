# sweep.py's random shapes on one GPU, SHARDS processes building at once, then (if DECODE names shapes) steps 11
# and 12 against cuBLAS there, one interleaved run per shape. After ../shared/device/README.md's first call (part a
# of the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
sweep_shards
if [ -n "${DECODE:-}" ]; then
  on 0 ${LIMIT:-240} decode python3 experiments/every_shape/check_and_time.py --steps 11,12 --shapes $DECODE \
      --json $R/decode.json
  grep -hE "cublas|False" $R/decode.log
fi
cat $R/wall.txt
grep -h "kernels," $R/sweep-*.log
grep -h '"passed": false' $R/sweep-*.log | head -20
tar czf $OUT/results.tgz -C $R .
