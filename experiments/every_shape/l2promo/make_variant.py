"""Write variants of step 12 whose TMA descriptors for A and B ask the L2 for other promotions, under
experiments/every_shape/l2promo/VARIANT/hopper/: an experiment, not a step. TIRx encodes every tensor map with
L2::128B unless told (tma.py's _normalize_l2_promotion); DeepGEMM's descriptors ask for L2::256B. Question: does a
larger promotion change the cost of rows that start off a 32-byte boundary (K % 16 != 0), where a lone CTA loses a
fifth of its speed, or the 4096^3 tie?

- l2_256: A and B loads with tensormap_l2_promotion="L2::256B".
- l2_64: A and B loads with tensormap_l2_promotion="L2::64B".
- l2_none: A and B loads with no promotion.

    python experiments/every_shape/l2promo/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402


def promotion(value: str) -> list[tuple[str, str]]:
    """Every load of A and B (the whole box and the one cut at the matrix's edge) asks for `value`."""
    return [("""dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]))""",
             f"""dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                              tensormap_l2_promotion="{value}")"""),
            ("""cta_mask=(1 << CLUSTER) - 1)""",
             f"""cta_mask=(1 << CLUSTER) - 1, tensormap_l2_promotion="{value}")""")]


if __name__ == "__main__":
    write_variant(HERE / "l2_256", promotion("L2::256B"), everywhere=True)
    write_variant(HERE / "l2_none", promotion("none"), everywhere=True)
    write_variant(HERE / "l2_64", promotion("L2::64B"), everywhere=True)
