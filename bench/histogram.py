"""Prometheus histogram quantiles for the bench scripts (load.sh, soak.sh)."""


def quantile_ms(buckets, q, digits=3):
    """As Prometheus's histogram_quantile, in milliseconds: linear within the bucket that holds
    the rank. `buckets`: (upper bound in seconds, cumulative count), sorted, +Inf last. None
    when they hold nothing."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return round(lower * 1000, digits)
            return round((lower + (le - lower) * (rank - below) / max(count - below, 1e-9)) * 1000, digits)
        lower, below = le, count
