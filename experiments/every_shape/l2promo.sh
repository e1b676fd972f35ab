# Step 12 beside its L2-promotion variants (l2promo/make_variant.py) on one GPU: SHAPES (check_and_time.py's
# shapes), PLANS (default auto,dp256c1: the step's choice and lone CTAs of 128x256), each plan built from each of
# TREES (default solutions,l2_256), one interleaved run per shape with cuBLAS. After ../shared/device/README.md's
# first call (part a of the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/l2promo/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
E=experiments/every_shape/l2promo
trees=$(echo ${TREES:-solutions,l2_256} | sed "s|[^,]*|$E/&|g; s|$E/solutions|solutions|")
on 0 ${LIMIT:-360} l2promo python3 experiments/every_shape/check_and_time.py --steps 12 --plans ${PLANS:-auto,dp256c1} \
    --plans-impl $trees --shapes ${SHAPES:?} --json $R/l2promo.json
cat $R/wall.txt $R/gpus.txt
grep -hE "cublas|False" $R/l2promo.log
tar czf $OUT/results.tgz -C $R .
