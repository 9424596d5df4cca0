"""The statistics every benchmark reports: the spread of repeated runs and ratios between them.

Repeated measurements are kept whole (`spread_summary`); a speed-up is the ratio of the medians,
with the range that the runs allow (the slowest run of one over the fastest of the other, and the
reverse); a configuration is called faster or slower only when every run of it beat, or lost to,
every run of the other.
"""

import statistics


def spread_summary(values):
    """Median, min, max and every value of repeated measurements."""
    values = list(values)
    if not values:
        raise ValueError("spread_summary needs at least one value")
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def ratio_of_medians(numerator, denominator):
    """Median of `numerator` over median of `denominator` (two spread summaries)."""
    return numerator["median"] / denominator["median"]


def ratio_range(numerator, denominator):
    """[lowest, highest] ratio the runs allow: min over the other's max, max over the other's min."""
    return [numerator["min"] / denominator["max"], numerator["max"] / denominator["min"]]


def ratio_or_none(numerator, denominator):
    """numerator / denominator, or None when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def verdict(mine, other):
    """'faster' / 'slower' when every run of `mine` beat / lost to every run of `other`, else None
    (the runs overlap: the difference is within this machine's noise)."""
    if mine["min"] > other["max"]:
        return "faster"
    if mine["max"] < other["min"]:
        return "slower"
    return None
