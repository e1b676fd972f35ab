# Step 12 beside swap_ab/make_variant.py's trees on one GPU (TREES: swap, A and B swapped where the host's model
# prefers it; margin, stream-K's margin on the whole cost; swap128, the swap in tiles at least 128 wide; before, step
# 12 before the swap, written by hand: git show 0c4155e:solutions/hopper/step12_stream_k.py > swap_ab/before/hopper/...):
# with CHECK=1 first check_step12 (device-setup.sh) with the known-bad KNOWN_BAD; then each tree's own plan at SHAPES,
# one interleaved run per shape with cuBLAS (each kernel checked first against fp32 torch); then at FORCED_SHAPES the
# FORCED plans built from FORCED_IMPL (default the swap tree). After ../shared/device/README.md's first call;
# everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
if [ "${TREES:-swap}" != before ]; then  # the variants are edits of step 12 before the swap
  python3 experiments/every_shape/swap_ab/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
fi
if [ -n "${CHECK:-}" ]; then  # step 12 with the swap in it: random shapes, its grade, the known-bad KNOWN_BAD
  check_step12 "${KNOWN_BAD:?}"
fi
trees=$(echo ${TREES:-swap} | sed "s|[^,]*|experiments/every_shape/swap_ab/&|g")
on 0 ${LIMIT:-330} swap python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl $trees --shapes ${SHAPES:?} --json $R/swap.json
[ -n "${FORCED_SHAPES:-}" ] && on 0 ${FORCED_LIMIT:-200} forced python3 experiments/every_shape/check_and_time.py \
    --steps 12 --impl ${FORCED_IMPL:-experiments/every_shape/swap_ab/swap} --plans ${FORCED:?} --shapes $FORCED_SHAPES --json $R/forced.json
cat $R/wall.txt
check_summary
grep -hE "cublas|False|rror" $R/swap.log $R/forced.log 2>/dev/null
tar czf $OUT/results.tgz -C $R .
