# Split-K with A and B swapped (the tokens on wgmma's n, B's tile loaded once) and split-K whose ranges differ by a
# K tile (S need not divide the K tiles), beside step 12's own plan, at few tokens and large K (heldout.sh and
# split_k.sh: step 12 0.84-0.89x cuBLAS there; cuBLAS runs split-K over swapped 128x176 tiles at 176x3584x18944).
# FORCED is a space-separated list of SHAPE:PLAN,PLAN,... (check_and_time.py's plan names, auto among them), each
# shape one interleaved run with cuBLAS; then ncu (ncu_step12) at NCU_SHAPES. After ../shared/device/README.md's
# first call; everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
for entry in ${FORCED:?}; do
  shape=${entry%%:*}
  on 0 ${LIMIT:-150} forced-$shape python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $shape \
      --plans ${entry#*:} --json $R/forced-$shape.json
done
for shape in $(echo ${NCU_SHAPES:-} | tr , ' '); do ncu_step12 $shape; done
cat $R/wall.txt
grep -hE "cublas|False|rror|skipped" $R/forced-*.log
ncu_summary
tar czf $OUT/results.tgz -C $R .
