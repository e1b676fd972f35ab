"""How well step 12's host model ranks the plans that were measured: for each shape with two or more plans timed on
the H100 or the H200 (h100*/, h200*/ files of this folder and their subfolders; each shape's plans in one run), the
plan the model would pick among them, the one that ran fastest, and the first's time over the second's ("regret"),
for ways of combining the SMs' cost with the DRAM's.

    python experiments/every_shape/model_regret.py

Plans are named as check_and_time.py's --plans (dp64r64, sk112c1, ...); a run's own plan ("step12") counts in the
runs of EARLIER_RUNS_PLANS, named there as the model of their day picked it (the model of 2026-11-28 morning, as the
summed model of 2026-11-27 but at 128x3584x18944).
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
# the plan a run's "step12" ran, where the model of that run's day differs from today's or may: (folder, shape) -> name
EARLIER_RUNS_PLANS = {
    ("h100-cluster2x2", (256, 3584, 3584)): "dp64c1", ("h100-cluster2x2", (256, 4096, 4096)): "dp64c1",
    ("h100-cluster2x2", (256, 4608, 3584)): "dp80c1", ("h100-cluster2x2", (256, 6144, 4096)): "dp96c1",
    ("h100-clusters", (256, 4608, 3584)): "dp80c1", ("h100-clusters", (1000, 3584, 3584)): "dp224c1",
    ("h100-clusters", (1000, 4096, 4096)): "dp256c1", ("h100-clusters", (1000, 4608, 3584)): "dp144c1",
    ("h100-clusters", (2048, 2048, 2048)): "dp256c1", ("h100-clusters", (4096, 4096, 4096)): "dp256c1",
    ("h100-clusters", (8192, 4096, 1024)): "dp256c1", ("h100-hypot", (128, 3584, 18944)): "dp64r64c1",
    ("h100-rows64", (100, 264, 4104)): "sk32r64", ("h100-rows64", (128, 3584, 3584)): "dp64r64c1",
    ("h100-rows64", (128, 3584, 18944)): "sk112c1", ("h100-rows64", (128, 4096, 4096)): "dp64r64c1",
    ("h100-rows64", (128, 4096, 14336)): "dp64r64c1", ("h100-rows64", (128, 4608, 3584)): "dp80r64c1",
    ("h100-rows64", (128, 6144, 4096)): "dp96r64c1", ("h100-rows64", (128, 28672, 4096)): "dp224c1",
    ("h100-rows64", (128, 37888, 3584)): "dp144c1", ("h100-rows64", (256, 3584, 18944)): "sk128",
    ("h100-rows64", (256, 4096, 4096)): "dp64c1", ("h100-rows64", (256, 4096, 14336)): "dp64c1",
    ("h100-rows64", (256, 4608, 3584)): "dp80c1", ("h100-rows64", (1000, 4608, 3584)): "dp144c1",
    ("h200-model-change", (8192, 8192, 8192)): "sk256", ("h200-model-change", (8192, 3584, 18944)): "sk144",
    ("h200-model-change", (128, 3584, 18944)): "sk112r64", ("h200-model-change", (1000, 28672, 4096)): "dp256c1",
    ("h200-model-change", (8192, 6144, 4096)): "sk256", ("h200-model-change", (8192, 28672, 4096)): "sk256",
    ("h200-model-change", (8192, 37888, 3584)): "dp256c1",
    ("h200-sk-widths", (128, 3584, 18944)): "dp64r64c1", ("h200-sk-widths", (256, 3584, 18944)): "sk112",
    ("h200-sk-widths", (256, 4096, 14336)): "dp64c1", ("h200-sk-widths", (256, 4096, 4096)): "dp64c1",
    # before the model knew of rows off 32-byte boundaries (K % 16 != 0: there it took lone CTAs)
    ("h200-alignment", (1000, 1000, 1000)): "dp64c1", ("h200-alignment", (3000, 3000, 1000)): "dp192c1",
    ("h200-alignment", (1000, 4104, 1000)): "dp128c1", ("h200-alignment", (4096, 4096, 1000)): "dp256c1",
    ("h200-alignment", (2048, 2048, 1000)): "dp256c1", ("h200-alignment", (1000, 4096, 1000)): "dp256c1",
    ("h200-alignment", (3000, 3000, 1016)): "dp192c1", ("h200-alignment", (4096, 4096, 4040)): "dp256c1",
    ("h200-alignment", (8192, 8192, 1000)): "dp256c1",
    # the same day's model where K % 16 == 0 (today's)
    ("h200-alignment", (512, 8192, 1024)): "dp256c1", ("h200-alignment", (2048, 8192, 512)): "dp256c1",
    ("h200-alignment", (4096, 4096, 512)): "dp256c1", ("h200-alignment", (1536, 1536, 1536)): "dp144c1",
    ("h200-alignment", (776, 5000, 2048)): "dp144c1", ("h200-alignment", (2048, 2048, 1024)): "dp256c1",
    ("h200-alignment", (333, 12288, 768)): "dp144c1", ("h200-alignment", (3000, 3000, 1024)): "dp192c1",
    ("h200-alignment", (1000, 4104, 1024)): "dp128c1", ("h200-alignment", (1000, 1000, 1024)): "dp64c1",
    ("h200-alignment", (3000, 3000, 1008)): "dp192c1",
    # today's model at rows off 32-byte boundaries
    ("h200-alignment-model", (1000, 1000, 1000)): "dp64", ("h200-alignment-model", (3000, 3000, 1000)): "dp192",
    ("h200-alignment-model", (2048, 8192, 1000)): "dp256", ("h200-alignment-model", (8192, 4096, 3576)): "dp256",
    ("h200-alignment-model", (1536, 1536, 1528)): "dp144", ("h200-alignment-model", (256, 4096, 4088)): "dp64",
    ("h200-alignment-model", (128, 4096, 4040)): "dp64r64", ("h200-alignment-model", (776, 5000, 2040)): "dp160",
    ("h200-alignment-model", (4093, 2056, 568)): "dp176", ("h200-alignment-model", (333, 12288, 760)): "dp192",
    ("h200-l2promo", (776, 5000, 2040)): "dp160", ("h200-l2promo", (256, 4096, 4088)): "dp64",
    # the model before 64-row CTAs at M > 128 where rows are misaligned
    ("h200-rows64-misaligned", (256, 4096, 4088)): "dp64", ("h200-rows64-misaligned", (333, 4096, 1000)): "dp128",
    ("h200-rows64-misaligned", (512, 2056, 2040)): "dp64", ("h200-rows64-misaligned", (776, 1024, 4088)): "dp64",
    ("h200-rows64-misaligned", (1000, 1000, 1000)): "dp64", ("h200-rows64-misaligned", (200, 5000, 760)): "dp80",
    ("h200-rows64-misaligned", (384, 2056, 1000)): "dp64", ("h200-rows64-misaligned", (256, 1024, 2040)): "sk32",
    ("h200-rows64-misaligned", (1500, 1024, 2040)): "dp96",
}
# the plan a variant tree's own choice ran: (folder, label) -> {shape: name} (rows64_misaligned: today's model)
VARIANT_RUNS_PLANS = {("h200-rows64-misaligned", "step12-rows64-auto"): {
    (256, 4096, 4088): "dp128r64", (333, 4096, 1000): "dp192r64", (512, 2056, 2040): "dp144r64",
    (776, 1024, 4088): "dp128r64", (1000, 1000, 1000): "dp128r64", (200, 5000, 760): "dp160r64",
    (384, 2056, 1000): "dp96r64", (256, 1024, 2040): "dp32r64", (1500, 1024, 2040): "dp208r64"}}
# the model of 2026-12-02 before split-K alone (h200-split-k-swapped/forced: its run's own plan, under both labels)
for _label in ("step12", "step12-auto"):
    VARIANT_RUNS_PLANS["h200-split-k-swapped/forced", _label] = {
        (176, 3584, 18944): "dp96r64c1", (200, 5120, 25600): "sk160k2", (200, 2560, 9728): "sk80k2",
        (192, 1536, 8960): "sk96r64k2", (200, 3072, 24576): "sk96k2", (256, 3584, 18944): "sk112k2"}
# the rule of 2026-12-02 (h200-split-k-swapped/check and restricted): "before" the model of 87475f7, "solutions" (and
# check's own "step12") the model of 1eb0470
SPLIT_K_RULE_PLANS = {  # shape: (before, after)
    (128, 4096, 14336): ("dp64r64c1", "sk96c1k3"), (128, 3584, 18944): ("sk112r64k2", "sk112c1k4"),
    (128, 8192, 28672): ("dp64c1", "sk128c1k2"), (256, 3072, 8192): ("dp48c1", "sk96k2"),
    (257, 264, 4104): ("sk48r64", "sk48r64k3"), (1, 4096, 14336): ("dp32r64c1", "sk96r64c1k3"),
    (200, 3072, 24576): ("sk96k2", "sk144k3"), (320, 1536, 8960): ("sk96k2", "sk112c1k3"),
    (150, 3072, 24576): ("sk96k2", "sk160c1k5x"), (200, 5120, 25600): ("sk160k2", "sk208c1k3x"),
    (176, 3584, 18944): ("dp96r64c1", "sk176c1k4x"), (96, 3584, 18944): ("sk112r64k2", "sk112c1k4"),
    (100, 3584, 18944): ("sk112r64k2", "sk112c1k4"), (100, 4096, 14336): ("dp64r64c1", "sk96c1k3"),
    (192, 1536, 8960): ("sk96r64k2", "sk112r64c1k3"), (64, 3072, 24576): ("sk96r64k2", "sk96r64c1k4"),
    (64, 2048, 8192): ("sk64r64k2", "sk48r64c1k3"), (200, 1536, 8960): ("sk48k2", "sk96k4"),
    (128, 1536, 8960): ("sk48r64k2", "sk96r64k4"),
}
for _folder in ("h200-split-k-swapped/check", "h200-split-k-swapped/restricted"):
    VARIANT_RUNS_PLANS[_folder, "step12-before-auto"] = {shape: plans[0] for shape, plans in SPLIT_K_RULE_PLANS.items()}
    VARIANT_RUNS_PLANS[_folder, "step12-solutions-auto"] = {shape: plans[1]
                                                            for shape, plans in SPLIT_K_RULE_PLANS.items()}
VARIANT_RUNS_PLANS["h200-split-k-swapped/check", "step12"] = VARIANT_RUNS_PLANS[
    "h200-split-k-swapped/check", "step12-solutions-auto"]
# the model of 1eb0470 (h200-rows64-pairs: its run's own plan, under both labels)
for _label in ("step12", "step12-auto"):
    VARIANT_RUNS_PLANS["h200-rows64-pairs", _label] = {
        (100, 4096, 14336): "sk96c1k3", (128, 3584, 18944): "sk112c1k4", (128, 3584, 3584): "dp64r64c1",
        (128, 4096, 14336): "sk96c1k3", (128, 4096, 4096): "dp64r64c1", (128, 4608, 3584): "dp80r64c1",
        (128, 6144, 4096): "dp96r64c1", (1, 4096, 14336): "sk96r64c1k3", (256, 3072, 8192): "sk96k2",
        (96, 3584, 18944): "sk112c1k4"}
# h200-few-tokens: forced/ ran the model of 1eb0470, check/ the model with FEW_TOKENS (its run's own plan, both labels)
for _label in ("step12", "step12-auto"):
    VARIANT_RUNS_PLANS["h200-few-tokens/forced", _label] = {
        (128, 3072, 24576): "sk96c1k4", (128, 3584, 18944): "sk112c1k4", (128, 4096, 14336): "sk96c1k3",
        (128, 5120, 25600): "sk128c1k3", (128, 8192, 28672): "sk128c1k2", (1, 4096, 14336): "sk96r64c1k3",
        (96, 4096, 14336): "sk96c1k3"}
    VARIANT_RUNS_PLANS["h200-few-tokens/check", _label] = {
        (128, 12288, 768): "dp192r64c1", (128, 14336, 4096): "dp224r64c1", (128, 2312, 3072): "dp48r64c1",
        (128, 28672, 4096): "dp224r64c1", (128, 3072, 8192): "dp48r64c1", (128, 3584, 18944): "sk112r64k2",
        (128, 37888, 3584): "dp192r64c1", (128, 4096, 14336): "dp64r64c1", (128, 8192, 8192): "dp128r64c1",
        (1, 8192, 28672): "dp64r64c1", (96, 8192, 28672): "dp128r64c1"}
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
    for path in sorted(glob.glob(str(HERE / "h100*" / "**" / "*.json"), recursive=True)
                       + glob.glob(str(HERE / "h200*" / "**" / "*.json"), recursive=True)):
        data = json.loads(Path(path).read_text())
        rows = data.get("rows") if isinstance(data, dict) else None
        folder = Path(path).parent.relative_to(HERE).as_posix()  # "h200-split-k-swapped/forced"
        for row in rows or []:
            if not isinstance(row.get("shape"), str):  # the bench's rows, one per step: not plans
                continue
            shape = tuple(int(x) for x in row["shape"].split("x"))
            for label, ms in row.get("ms", {}).items():
                # dpW / skW, r64, c1: plans of step 12; other suffixes are experiments (A multicast, 2x2
                # clusters, capped stages, D in the ring)
                if re.fullmatch(r"step12-(dp\d+(r64)?(c1)?|sk\d+(r64)?(c1)?(k\d+)?)x?", label):
                    name = label[len("step12-"):]
                elif label == "step12" and (folder, shape) in EARLIER_RUNS_PLANS:
                    name = EARLIER_RUNS_PLANS[folder, shape]
                elif shape in VARIANT_RUNS_PLANS.get((folder, label), {}):
                    name = VARIANT_RUNS_PLANS[folder, label][shape]
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
            sm = plan.estimated_cost * plan.margin
            time = combine(sm, module["dram_cost"](*shape, plan))
            # at most FEW_TOKENS rows the host weighs only 64-row CTAs, straight (the others rank after them), and
            # split-K by a margin
            few_tokens = shape[0] <= module["FEW_TOKENS"]
            if few_tokens and plan.splits_k:
                time *= module["FEW_TOKENS_SPLIT_K_MARGIN"]
            # ties as the model breaks them: 128 rows, alone (stream-K, which it proposes only in pairs: pairs),
            # wider, whole tiles first
            return (few_tokens and (plan.tile_m != 64 or plan.swap_ab), round(time, 6), -plan.tile_m,
                    -plan.cluster if plan.sk_units and not plan.splits_k else plan.cluster,
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
