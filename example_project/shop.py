"""The demo's shop: places an order every few seconds (``o1``, ``o2``, ...);
each order adds a deferred check, "is it shipped yet?"
(:func:`example_project.proj.place_order`). Runs until stopped.

    DGS_EXAMPLE_REDIS_URL=redis://localhost:6379/0 python -m example_project.shop
"""

from __future__ import annotations

import argparse
import time

from .proj import place_order


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=6.0, help="seconds between orders")
    parser.add_argument("--orders", type=int, default=None, help="stop after this many")
    args = parser.parse_args(argv)
    number = 0
    while args.orders is None or number < args.orders:
        number += 1
        order = f"o{int(time.time())}{number}"
        print(
            f"shop: order {order} placed; its shipping check was {place_order(order)}", flush=True
        )
        time.sleep(args.every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
