# Step 12 beside lone_sk/make_variant.py's (stream-K over lone CTAs weighed where one CTA tile holds all of M) on one
# GPU: each tree's own plan at SHAPES, one interleaved run per shape with cuBLAS. After ../shared/device/README.md's
# first call (part a of the wheel); everything comes back in $OUT/results.tgz. Not yet run (2026-11-29).
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/lone_sk/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
on 0 ${LIMIT:-300} lone-sk python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl solutions,experiments/every_shape/lone_sk/lone --shapes ${SHAPES:?} --json $R/lone-sk.json
cat $R/wall.txt
grep -hE "cublas|False" $R/lone-sk.log
[ -n "${NO_TAR:-}" ] || tar czf $OUT/results.tgz -C $R .
