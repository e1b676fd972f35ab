# Step 12 (a TMA box of A no taller than A) beside a_rows/make_variant.py's tree (the box BLK_M rows tall, as
# before) on one GPU: PLANS (default auto) from both trees at SHAPES, one interleaved run per shape with cuBLAS;
# then, with CHECK=1, sweep.py's random shapes (SHARDS processes) and `python -m grader --step 12` on the solution.
# After ../shared/device/README.md's first call (part a of the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/a_rows/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
if [ -n "${CHECK:-}" ]; then
  check_step12
fi
on 0 ${LIMIT:-300} a-rows python3 experiments/every_shape/check_and_time.py --steps 12 --plans ${PLANS:-auto} \
    --plans-impl solutions,experiments/every_shape/a_rows/full --shapes ${SHAPES:?} --json $R/a-rows.json
cat $R/wall.txt
check_summary
grep -hE "cublas|False" $R/a-rows.log
tar czf $OUT/results.tgz -C $R .
