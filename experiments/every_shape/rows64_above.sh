# M a little above a multiple of 128 (136, 160, 192 tokens): step 12 takes 128-row CTA tiles there (64-row ones only
# where M <= 128 or K % 16 != 0), and its last row of tiles holds few rows (136: 8 of 128). Step 12's own plan beside
# 64-row CTA tiles of several widths, lone and in pairs, at SHAPES, one interleaved run per shape with cuBLAS, on one
# GPU. After ../shared/device/README.md's first call (part a of the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
on 0 ${LIMIT:-300} rows64-above python3 experiments/every_shape/check_and_time.py --steps 12 \
    --plans ${PLANS:-auto,dp64r64c1,dp96r64c1,dp128r64c1,dp224r64c1,dp128r64,dp224r64} \
    --shapes ${SHAPES:-136x28672x8192,136x4096x14336,160x14336x4096,192x4096x4096,264x4096x4096} --json $R/rows64-above.json
cat $R/wall.txt
grep -hE "cublas|False" $R/rows64-above.log
tar czf $OUT/results.tgz -C $R .
