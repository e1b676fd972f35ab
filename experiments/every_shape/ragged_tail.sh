# Does a ragged last row of tiles cost more than its rows? Step 12 at pairs of shapes that take the same plan and the
# same number of tiles, one with M a multiple of the CTA tile's rows and one whose last row of tiles holds a few rows
# (the rest of A's TMA box lies past M and is filled with zeros: at decode batches each such row cost about 2.8
# cycles per K tile). One interleaved run per shape with cuBLAS, on one GPU. After ../shared/device/README.md's first
# call (part a of the wheel); everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
on 0 ${LIMIT:-300} ragged-tail python3 experiments/every_shape/check_and_time.py --steps 12 \
    --shapes ${SHAPES:-72x4096x14336,128x4096x14336,136x4096x14336,256x4096x14336,1032x2048x4096,1152x2048x4096,1032x2048x4088,1152x2048x4088,776x5000x2040,1024x5000x2040,1000x4096x4096,1024x4096x4096} \
    --json $R/ragged-tail.json
cat $R/wall.txt
grep -hE "cublas|False" $R/ragged-tail.log
[ -n "${NO_TAR:-}" ] || tar czf $OUT/results.tgz -C $R .
