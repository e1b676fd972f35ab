# Step 12 at linear layers of LLM families the bench does not time (heldout_layers.py: SEED, COUNT), at the bench's
# token counts: its own plan beside cuBLAS, one interleaved run per shape (each kernel checked first); the names of
# cuBLAS's kernels there; at the WORST shapes of that run (default 3) step 12 with the plans FORCED beside its own;
# ncu on step 12 and cuBLAS at the worst one. After ../shared/device/README.md's first call; everything comes back
# in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
SHAPES=${SHAPES:-$(python3 experiments/every_shape/heldout_layers.py --count ${COUNT:-24} --seed ${SEED:-20261201})}
on 0 ${LIMIT:-300} heldout python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $SHAPES --json $R/heldout.json
worst=$(python3 -c "
import json; rows = json.load(open('$R/heldout.json'))['rows']
rows = sorted((r for r in rows if r.get('vs_cublas')), key=lambda r: r['vs_cublas']['step12'])
print(','.join(r['shape'] for r in rows[:${WORST:-3}]))")
python3 experiments/every_shape/cublas_kernels.py $(echo $worst | tr , ' ') > $R/cublas-kernels.log 2>&1
[ -n "$worst" ] && on 0 ${FORCED_LIMIT:-170} forced python3 experiments/every_shape/check_and_time.py --steps 12 \
    --plans ${FORCED:-dp256c1,dp128c1,dp256,dp128,sk256,sk128,dp256c1x,dp128c1x} --shapes $worst \
    --json $R/forced.json
first=${worst%%,*}
[ -n "$first" ] && ncu_step12 $first
cat $R/wall.txt $R/cublas-kernels.log
grep -hE "cublas|False|rror" $R/heldout.log $R/forced.log 2>/dev/null
ncu_summary
tar czf $OUT/results.tgz -C $R .
