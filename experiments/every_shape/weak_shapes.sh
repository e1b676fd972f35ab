# Step 12's weakest measured shapes: what cuBLAS runs there (cublas_kernels.py), step 12's own plan beside the
# plans it passed over (one interleaved run per shape with cuBLAS; SMALL_M shapes with SMALL_M_PLANS, MID_M with
# MID_M_PLANS), then ncu on step 12 and cuBLAS at NCU_SHAPES (one launch each, clocks not locked). After
# ../shared/device/README.md's first call; results in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
SMALL_M=${SMALL_M:-136x28672x8192,184x37888x3584,176x3584x18944,300x28672x8192}
MID_M=${MID_M:-777x4096x14336,776x5000x2040}
python3 experiments/every_shape/cublas_kernels.py $(echo $SMALL_M,$MID_M | tr , ' ') > $R/cublas-kernels.log 2>&1
on 0 ${LIMIT:-240} small-m python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $SMALL_M \
    --plans ${SMALL_M_PLANS:-dp224,dp256,dp128,dp256r64c1,dp128r64c1,dp224c1,sk256,sk128} --json $R/small-m.json
on 0 ${LIMIT:-240} mid-m python3 experiments/every_shape/check_and_time.py --steps 12 --shapes $MID_M \
    --plans ${MID_M_PLANS:-dp256,dp256c1,dp224,dp192,dp128,dp128c1,sk256,sk128} --json $R/mid-m.json
for shape in $(echo ${NCU_SHAPES:-} | tr , ' '); do ncu_step12 $shape; done
cat $R/wall.txt $R/cublas-kernels.log
grep -hE "cublas|False" $R/small-m.log $R/mid-m.log
ncu_summary
tar czf $OUT/results.tgz -C $R .
