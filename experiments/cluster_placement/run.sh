#!/usr/bin/env bash
# On a Hopper GPU machine with apache-tvm importable (../shared/device/README.md): the placement probe, the launch
# latency, the variants timed with cuBLAS and their L2 traffic under ncu, as in docs/measurements.md
# "Where the cluster launch puts CTAs". Writes everything under $OUT (default ./reports/cluster_placement).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
OUT=${OUT:-reports/cluster_placement}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

nvcc -arch=sm_90a -o /tmp/placement_probe "$here/placement_probe.cu"
/tmp/placement_probe > "$OUT/placement.json" 2> "$OUT/placement.err"
python3 - "$OUT/placement.json" <<'PY'
import json, sys
launches = json.load(open(sys.argv[1]))
for name, launch in launches.items():
    if isinstance(launch, dict):
        print(f"{name}: SM of the first 40 CTAs", [cta[0] for cta in launch["ctas"][:40]])
PY
nvcc -arch=sm_90a -o /tmp/launch_latency "$here/launch_latency.cu"
/tmp/launch_latency | tee "$OUT/launch_latency.txt"

timed="step8 step8+plain-order step8+in-clusters step8+in-clusters+plain-order step8+n-grouped
       step8+in-clusters+n-grouped step8+grid-2d step8+in-clusters+grid-2d
       step9 step9+plain-order step9+n-grouped step9+grid-2d
       step10 step10+plain-order step10+grid-2d step10+no-cluster step10+no-cluster+plain-order"
python3 "$here/time_variants.py" --out "$OUT/timed.json" --shapes 2048,4096,8k4k1k $timed 2>&1 \
    | grep -v Warning | tee "$OUT/timed.log"

# L2 sectors read for the TMA loads: first one tile (one CTA or one cluster: nothing to share with another), where
# they are the bytes requested / 32, then the whole 4096^3 grid
metrics=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,lts__t_sectors_srcunit_tex_op_read.sum
metrics=$metrics,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
for run in step8:128x128x16384 step9:256x128x16384 step8:4096 step8+in-clusters:4096 step8+in-clusters+plain-order:4096 \
           step9:4096 step10:4096 step10+no-cluster:4096; do
  IFS=: read -r name shape <<< "$run"
  echo "=== $name $shape" >> "$OUT/ncu.txt"
  ncu --clock-control none --metrics "$metrics" -k regex:kernel_kernel --launch-skip 2 -c 1 \
      python3 "$here/one_launch.py" "$name" "$shape" 2>&1 | grep -E "^\s+(gpu__|sm__|lts__|dram__)" >> "$OUT/ncu.txt" || echo "  (ncu gave no metrics)" >> "$OUT/ncu.txt"
done
cat "$OUT/ncu.txt"
