# Step 12 beside its writeback variants (epilogue/make_variant.py; VARIANTS, default stsm,skew,stsm_skew,noepi) on
# a node of two GPUs, one interleaved run per shape with cuBLAS; the wrong ones (noepi, bound: no writeback) are
# timed too. PLANS (default auto) are check_and_time.py's plan names, each built from each variant (`solutions`
# among VARIANTS: step 12 itself). SHAPES0 on GPU 0, SHAPES1 on GPU 1; VARIANTS1 and PLANS1, where set, replace
# VARIANTS and PLANS on GPU 1 (for example: a variant under forced plans there). After ../shared/device/README.md's
# first call (part a of the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
python3 experiments/every_shape/epilogue/make_variant.py > $R/variants.log 2>&1 || { cat $R/variants.log; exit 3; }
E=experiments/every_shape/epilogue
run() {  # gpu shapes variants plans
  local trees=$(echo $3 | sed "s|[^,]*|$E/&|g; s|$E/solutions|solutions|")
  on $1 ${LIMIT:-500} epilogue-gpu$1 python3 experiments/every_shape/check_and_time.py --steps 12 \
      --plans $4 --plans-impl $trees --time-wrong --shapes $2 --json $R/epilogue-gpu$1.json
}
VARIANTS=${VARIANTS:-stsm,skew,stsm_skew,noepi}
run 0 ${SHAPES0:?} $VARIANTS ${PLANS:-auto} &
run 1 ${SHAPES1:?} ${VARIANTS1:-$VARIANTS} ${PLANS1:-${PLANS:-auto}} &
wait
cat $R/wall.txt $R/gpus.txt
grep -hE "cublas|False" $R/epilogue-gpu*.log
tar czf $OUT/results.tgz -C $R .
