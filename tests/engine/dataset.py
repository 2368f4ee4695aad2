"""The generated data set the engine tests load: 3000 rows with ties, NULLs in every
nullable column, case/accent variants and trailing spaces in strings."""

from __future__ import annotations

import random
from decimal import Decimal

N_ROWS = 3000
GROUPS = ["a", "A", "b", "B ", "c", "e", "é", None, "Zeta", "zeta"]
NAMES = ["anna", "Bob", "carl", "dave", "Éva", "frank", None, "gus", "hal", "ivy", "Ivy"]


def generated_rows() -> list[str]:
    rnd = random.Random(20261122)
    rows = []
    for i in range(1, N_ROWS + 1):
        customer = rnd.randint(1, 60)
        grp = rnd.choice(GROUPS)
        name = rnd.choice(NAMES)
        qty = rnd.choice([None, *range(0, 25)])
        price = None if rnd.random() < 0.1 else Decimal(rnd.randint(0, 20000)) / 100
        score = None if rnd.random() < 0.1 else rnd.choice([0.5, 1.25, 2.0, -3.5, 10.125])

        def lit(v):
            if v is None:
                return "NULL"
            if isinstance(v, str):
                return "'" + v.replace("'", "''") + "'"
            return str(v)

        rows.append(f"({i}, {customer}, {lit(grp)}, {lit(name)}, {lit(qty)}, {lit(price)}, {lit(score)})")
    return rows
