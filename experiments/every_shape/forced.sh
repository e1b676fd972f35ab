# Forced plans beside step 12's own, each shape one interleaved run with cuBLAS, then ncu on single launches.
# FORCED: space-separated SHAPE:PLAN,PLAN,... (check_and_time.py's plan names, auto among them); NCU: space-separated
# SHAPE or SHAPE:PLAN (ncu_step12). After ../shared/device/README.md's first call; results in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
for entry in ${FORCED:?}; do
  shape=${entry%%:*}
  on 0 ${LIMIT:-150} forced-$shape python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $shape \
      --plans ${entry#*:} --json $R/forced-$shape.json
done
for entry in ${NCU:-}; do
  shape=${entry%%:*}; plan=${entry#$shape}; ncu_step12 $shape ${plan#:}
done
cat $R/wall.txt
grep -hE "cublas|False|rror|skipped" $R/forced-*.log
ncu_summary
tar czf $OUT/results.tgz -C $R .
