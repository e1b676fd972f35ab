"""How well step 12's host model ranks the plans that were measured: for each shape with two or more plans timed on
the H100 (h100*/ files of this folder), the plan the model would pick among them, the one that ran fastest, and the
first's time over the second's ("regret"), for ways of combining the SMs' cost with the DRAM's.

    python experiments/every_shape/model_regret.py

Plans are named as check_and_time.py's --plans (dp64r64, sk112c1, ...); a run's own plan ("step12") counts in the
runs made with the model of 2026-11-27 evening (h100-rows64, h100-clusters: the SMs' and DRAM's costs summed), named
as today's model names it, but at 128x3584x18944, where the two differ; and in the runs made with today's model
(h100-hypot, h100-cluster2x2).
Repeated measurements of a plan are averaged. Plans the model never proposes (64-row tiles at M > 128) are ranked
too: the regret is of the ranking, not of the model's candidate list.
"""

from __future__ import annotations

import glob
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_and_time import REPO, forced_plan  # noqa: E402
from grader.core import build  # noqa: E402
from grader.core.steps import STEPS  # noqa: E402

SM_COUNT = 132
RUNS_WITH_THE_SUMMED_MODEL = ("h100-rows64", "h100-clusters")
RUNS_WITH_TODAYS_MODEL = ("h100-hypot", "h100-cluster2x2")
SUMMED_MODEL_DIFFERS = {(128, 3584, 18944): "sk112c1"}  # where today's model picks otherwise
COMBINATIONS = {
    "sum": lambda sm, dram: sm + dram,
    "max": max,
    "root of the sum of squares": lambda sm, dram: math.hypot(sm, dram),
}


def plan_name(plan) -> str:
    return (("sk" if plan.sk_units else "dp") + str(plan.tile_n) + ("r64" if plan.tile_m == 64 else "")
            + ("c1" if plan.cluster == 1 else ""))


def measured(module: dict) -> dict[tuple, dict[str, float]]:
    """{shape: {plan name: mean time / cuBLAS time}}."""
    times: dict[tuple, dict[str, list[float]]] = {}
    for path in sorted(glob.glob(str(HERE / "h100*" / "*.json"))):
        data = json.loads(Path(path).read_text())
        rows = data.get("rows") if isinstance(data, dict) else None
        for row in rows or []:
            if not isinstance(row.get("shape"), str):  # the bench's rows, one per step: not plans
                continue
            shape = tuple(int(x) for x in row["shape"].split("x"))
            for label, ms in row.get("ms", {}).items():
                # dpW / skW, r64, c1: plans of step 12; other suffixes are experiments (A multicast, 2x2
                # clusters, capped stages, D in the ring)
                if re.fullmatch(r"step12-(dp|sk)\d+(r64)?(c1)?", label):
                    name = label[len("step12-"):]
                elif label == "step12" and any(run in path for run in RUNS_WITH_THE_SUMMED_MODEL):
                    name = SUMMED_MODEL_DIFFERS.get(shape) or plan_name(module["plan_decomposition"](*shape, SM_COUNT))
                elif label == "step12" and any(run in path for run in RUNS_WITH_TODAYS_MODEL):
                    name = plan_name(module["plan_decomposition"](*shape, SM_COUNT))
                else:
                    continue
                times.setdefault(shape, {}).setdefault(name, []).append(ms / row["ms"]["cublas"])
    return {shape: {name: sum(v) / len(v) for name, v in plans.items()} for shape, plans in times.items()}


def regrets(combine) -> dict[tuple, tuple[str, str, float]]:
    """{shape: (the plan the model picks, the fastest, the first's time over the second's)} with `combine`
    (sm cost, dram cost) -> time."""
    module = build.kernel_factory(REPO / "solutions", "hopper", STEPS["hopper"][12]).__globals__
    found = {}
    for shape, plans in sorted(measured(module).items()):
        if len(plans) < 2:
            continue

        def key(name):
            plan = forced_plan(type("m", (), module), name, shape, SM_COUNT)
            sm = plan.estimated_cost * (module["STREAM_K_MARGIN"] if plan.sk_units else 1.0)
            # ties as the model breaks them: 128 rows, pairs, wider, whole tiles first
            return (round(combine(sm, module["dram_cost"](*shape, plan)), 6), -plan.tile_m, -plan.cluster,
                    -plan.tile_n, plan.sk_units > 0)
        pick, best = min(plans, key=key), min(plans, key=plans.get)
        found[shape] = (pick, best, plans[pick] / plans[best])
    return found


def main() -> None:
    for label, combine in COMBINATIONS.items():
        found = regrets(combine)
        for shape, (pick, best, regret) in found.items():
            if pick != best:
                print(f"  {label}: {'x'.join(map(str, shape))} picks {pick}, fastest {best}: {regret:.3f}")
        ratios = [regret for _, _, regret in found.values()]
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{label}: the fastest measured plan at {sum(r == 1 for r in ratios)} of {len(ratios)} shapes; "
              f"regret geometric mean {mean:.4f}, worst {max(ratios):.3f}")


if __name__ == "__main__":
    main()
