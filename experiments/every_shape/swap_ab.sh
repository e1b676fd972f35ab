# Step 12 beside swap_ab/make_variant.py's trees (TREES: swap, A and B swapped where the host's model prefers it;
# margin, stream-K's margin on the whole cost; swap128, the swap in tiles at least 128 wide; before, step 12 before
# the swap, written by hand: git show 0c4155e:solutions/hopper/step12_stream_k.py) on one GPU. With CHECK=1 first
# sweep.py's random shapes on the solution (SHARDS processes), its grade and the known-bad KNOWN_BAD on the GPU; each tree's own plan at SHAPES, one interleaved run per shape with cuBLAS (each kernel first checked against fp32 torch);
# then at FORCED_SHAPES the variant's plan beside FORCED plans of the swapped problem. After
# ../shared/device/README.md's first call; everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
if [ "${TREES:-swap}" != before ]; then  # the variants are edits of step 12 before the swap
  python3 experiments/every_shape/swap_ab/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
fi
V=experiments/every_shape/swap_ab/swap
if [ -n "${CHECK:-}" ]; then  # step 12 with the swap in it: random shapes, its grade, the known-bad KNOWN_BAD
  sweep_shards
  on 0 200 grade12 python3 -m grader --step 12 --impl solutions --track hopper
  on 0 300 known-bad python3 -m pytest -q tests/test_known_bad_gpu.py -k "${KNOWN_BAD:?}"
fi
trees=$(echo ${TREES:-swap} | sed "s|[^,]*|experiments/every_shape/swap_ab/&|g")
on 0 ${LIMIT:-330} swap python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl $trees --shapes ${SHAPES:?} --json $R/swap.json
[ -n "${FORCED_SHAPES:-}" ] && on 0 ${FORCED_LIMIT:-200} forced python3 experiments/every_shape/check_and_time.py \
    --steps 12 --impl ${FORCED_IMPL:-$V} --plans ${FORCED:?} --shapes $FORCED_SHAPES --json $R/forced.json
cat $R/wall.txt
grep -h "kernels," $R/sweep-*.log 2>/dev/null
grep -h '"passed": false' $R/sweep-*.log 2>/dev/null | head -20
tail -15 $R/grade12.log 2>/dev/null
tail -5 $R/known-bad.log 2>/dev/null
grep -hE "cublas|False|rror" $R/swap.log $R/forced.log 2>/dev/null
tar czf $OUT/results.tgz -C $R .
