"""experiments/cluster_placement: every variant its run.sh times still builds from the current solutions, with
the launch it names; a solution that no longer has a line a variant rewrites is named, not silently measured."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO
from grader.core import build

EXPERIMENT = REPO / "experiments" / "cluster_placement"
sys.path.insert(0, str(EXPERIMENT))

import variants  # noqa: E402


def _timed_names() -> list[str]:
    script = (EXPERIMENT / "run.sh").read_text()
    return re.search(r'timed="([^"]*)"', script).group(1).split()


def _build(name: str, folder):
    spec, factory, building = variants.load(name, folder)
    with building:
        return build.build(factory, spec, (512, 512, 256), "sm_90a", 132)


@pytest.mark.parametrize("name", _timed_names())
def test_each_timed_variant_builds_with_the_launch_it_names(name, tmp_path):
    artifacts = _build(name, tmp_path)
    clustered = "in-clusters" in name or (not name.startswith("step8") and "no-cluster" not in name)
    assert artifacts.cluster == ((2, 1, 1) if clustered else (1, 1, 1))
    assert artifacts.grid == ((2, 66, 1) if "grid-2d" in name else (132, 1, 1))
    assert ("plain_order" in artifacts.cuda_source) == ("plain-order" in name)
    assert "HGMMA" in artifacts.sass


def test_the_plain_order_numbers_every_sm_once():
    """The order is C in the rewrite; the same arithmetic here must be a permutation of the 132 SMs."""
    code = variants._PLAIN_ORDER
    lower = re.search(r"smid < 64\) \{ int t = smid >> 1; plain_order = ([^;]+);", code).group(1)
    upper = re.search(r"smid < 120\) \{ int t = \(smid - 64\) >> 1; plain_order = ([^;]+);", code).group(1)
    order = []
    for smid in range(132):
        if smid < 64:
            t = smid >> 1
            order.append(eval(lower.replace("/", "//"), {"t": t, "smid": smid}))
        elif smid < 120:
            t = (smid - 64) >> 1
            order.append(eval(upper.replace("/", "//"), {"t": t, "smid": smid}))
        else:
            order.append(smid)
    assert sorted(order) == list(range(132))


def test_a_solution_without_the_line_a_variant_rewrites_is_named(tmp_path, monkeypatch):
    changed = (variants.SOLUTIONS / variants.STEP_FILES[10]).read_text().replace("cta_mask=", "mask=")
    (tmp_path / variants.STEP_FILES[10]).write_text(changed)
    monkeypatch.setattr(variants, "SOLUTIONS", tmp_path)
    with pytest.raises(variants.SolutionChanged, match="cta_mask"):
        variants.source("step10+no-cluster")


def test_an_unknown_change_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown change 'fast'.*in-clusters"):
        variants.source("step9+fast")


def _make_variant(experiment: str):
    """experiments/every_shape/EXPERIMENT/make_variant.py, imported by path (each experiment has one)."""
    import importlib.util

    path = REPO / "experiments" / "every_shape" / experiment / "make_variant.py"
    module_spec = importlib.util.spec_from_file_location(f"{experiment}_make_variant", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_every_writeback_variant_still_rewrites_step_12_and_stmatrix_reaches_the_sass(tmp_path):
    """The writeback experiment's variants (experiments/every_shape/README.md) are edits of the current step 12's
    straight writeback (the swapped one left out: they are timed where the host does not swap): each edit must still
    find its line, and the stmatrix staging must build into STSM where step 12 has none (at 2048^2
    x 256 step 12's tiles are 128 x 256: all through the swizzled staging, none through the 8-column rest)."""
    from grader.core.steps import STEPS

    made = _make_variant("epilogue")
    for name, edits in {"stsm": made.STSM, "skew": made.SKEW, "stsm_warp": made.STSM + made.PER_WARP,
                        "onepass": made.STSM + made.ONE_PASS, "stsm_db": made.STSM + made.DOUBLE_BUFFERED,
                        "under": made.under_edits()}.items():
        made.write_variant(tmp_path / name, edits, transform=made.straight_only)
    solution = (REPO / "solutions" / "hopper" / "step12_stream_k.py").read_text()
    for code in ("", made.BOUND, made.DIRECT, made.PACK):  # noepi, bound, direct, under
        assert "TODO 12.15: the writeback" not in made.writeback_replaced(solution, code)

    spec = STEPS["hopper"][12]
    with_stmatrix = build.build(build.kernel_factory(tmp_path / "stsm", "hopper", spec), spec, (2048, 2048, 256),
                                "sm_90a", 132)
    assert "STSM" in with_stmatrix.sass and "STS.U16" not in with_stmatrix.sass


def test_the_dynamic_scheduler_variant_still_rewrites_step_12_and_asks_a_counter_only_where_it_should(tmp_path):
    """experiments/every_shape/dynamic/make_variant.py (experiments/every_shape/README.md, "The last wave at 4096^3")
    edits the current step 12: each edit must still find its line, and the variant must build with the tile counter's atomics where
    the plan is whole tiles for lone CTAs over more than one wave (4096^3), and with none where it is one wave
    (2048^3: 128 tiles for 132 CTAs, step 12's own order)."""
    from grader.core.steps import STEPS

    made = _make_variant("dynamic")
    made.write_variant(tmp_path / "dynamic", made.DYNAMIC)

    spec = STEPS["hopper"][12]
    factory = build.kernel_factory(tmp_path / "dynamic", "hopper", spec)
    waves = build.build(factory, spec, (4096, 4096, 4096), "sm_90a", 132)
    one_wave = build.build(factory, spec, (2048, 2048, 2048), "sm_90a", 132)
    assert "atomic_add((&(tile_counter_ptr[0]))" in waves.cuda_source and "ATOMG" in waves.sass
    assert "ATOMG" not in one_wave.sass
