"""Settling: how a run ends (the decision in ``verdicts``, the writes in ``settler``),
retries of backend writes, the occurrence ledger, overlap tickers and the failure pause."""
