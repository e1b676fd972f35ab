# Step 12 beside rows64_above/make_variant.py's (64-row CTA tiles weighed up to M = 192) on one GPU: each tree's own
# plan at SHAPES, one interleaved run per shape with cuBLAS. After ../shared/device/README.md's first call (part a of
# the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/rows64_above/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
on 0 ${LIMIT:-300} upto192 python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl solutions,experiments/every_shape/rows64_above/upto192 --shapes ${SHAPES:?} --json $R/upto192.json
cat $R/wall.txt
grep -hE "cublas|False" $R/upto192.log
tar czf $OUT/results.tgz -C $R .
