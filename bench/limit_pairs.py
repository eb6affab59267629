"""Pairs of end-to-end runs, without a limit and with a limit over 1,000 keys,
alternating, to quote the median ratio pair by pair (this machine's speed drifts more
between runs than the limit costs). The limit is a concurrency limit of 10 per key
(``--against limited``) or a rate limit per key that is never reached (``--against
rated``: what asking for each start costs), or a task that keeps its result (``--against
kept``: what writing the result record costs), or one with a fair-share key over the
same keys (``--against fair``: what taking turns costs).

python -m bench.limit_pairs [--pairs 8] [--messages 20000]
                            [--against limited|rated|kept|fair]
                            [--out FILE.json]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from bench.common import alternate, on_sqlite_and_redis
from bench.limits import end_to_end

COLUMNS = {
    "limited": "limit_10_per_key",
    "rated": "rate_limit_per_key",
    "kept": "result_kept",
    "fair": "fair_share_per_key",
}


def pairs(url: str, count: int, rounds: int, against: str = "limited") -> dict[str, object]:
    return {
        "backend": url.split("://")[0],
        "against": against,
        "messages": count,
        **alternate(
            rounds,
            "no_limit",
            lambda: end_to_end(url, "free", count, 1000)["per_second"],
            COLUMNS[against],
            lambda: end_to_end(url, against, count, 1000)["per_second"],
        ),
    }


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--against", choices=sorted(COLUMNS), default="limited")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    on_sqlite_and_redis(
        lambda url: pairs(url, args.messages, args.pairs, args.against), {}, args.out, None
    )


if __name__ == "__main__":
    main()
