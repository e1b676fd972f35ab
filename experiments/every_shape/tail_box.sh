# Step 12 (TMA boxes that stop at the matrix's edges) beside tail_box/make_variant.py's tree (A's box min(BLK_M, M)
# rows tall and B's whole, as before) on one GPU: with CHECK=1 first sweep.py's random shapes on the solution
# (SHARDS processes), its grade and the known-bad KNOWN_BAD on the GPU; then each tree's own plan at SHAPES, one
# interleaved run per shape with cuBLAS. After ../shared/device/README.md's first call (part a of the
# wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/tail_box/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
if [ -n "${CHECK:-}" ]; then
  check_step12 "${KNOWN_BAD:-hopper-12-a-tail-min-of-blk-m-and-m}"
fi
on 0 ${LIMIT:-300} tail-box python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl solutions,experiments/every_shape/tail_box/full --shapes ${SHAPES:?} --json $R/tail-box.json
cat $R/wall.txt
check_summary
grep -hE "cublas|False" $R/tail-box.log
[ -n "${NO_TAR:-}" ] || tar czf $OUT/results.tgz -C $R .
