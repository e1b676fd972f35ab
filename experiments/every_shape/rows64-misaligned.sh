# Step 12's choice beside rows64_misaligned/make_variant.py's (64-row CTAs above 128 rows where K % 16 != 0) on one
# GPU, one interleaved run per shape of SHAPES with cuBLAS. After ../shared/device/README.md's first call (part a of
# the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/rows64_misaligned/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
on 0 ${LIMIT:-360} rows64-misaligned python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl solutions,experiments/every_shape/rows64_misaligned/rows64 --shapes ${SHAPES:?} \
    --json $R/rows64-misaligned.json
cat $R/wall.txt
grep -hE "cublas|False" $R/rows64-misaligned.log
tar czf $OUT/results.tgz -C $R .
