"""From the ranks' times to bus bandwidth: the bytes one rank sends (the caller's traffic rule),
busbw against the link's rate, and the ratios between the paths."""

from handson_lib.experiments import stats
from handson_lib.messages import tr
from handson_lib.experiments.allreduce.units import IN_PLACE_PATH, algbw, gbps_to_gibitps

def add_bus_bandwidth(result, traffic_rule):
    """Add busbw to every record of `result` (in place; also returned), with `traffic_rule(nbytes,
    p)`: the bytes one rank sends in an allreduce of nbytes over p ranks. A point-to-point record's
    traffic is its own bytes (busbw = algbw). Adds the ratios per message size too."""
    p = result["ranks"]
    for r in result["results"]:
        traffic = r["bytes"] if r["path"] == "p2p" else traffic_rule(r["bytes"], p)
        if isinstance(traffic, bool) or not isinstance(traffic, (int, float)) or traffic < 0:
            raise ValueError(f"traffic_rule({r['bytes']}, {p}) gave {traffic!r}: it must return the "
                             f"bytes one rank sends, a number >= 0")
        r["traffic_bytes"] = traffic
        r["busbw_GBps"] = algbw(traffic, r["time_s"]) if traffic else 0.0
        r["busbw_Gibps"] = gbps_to_gibitps(r["busbw_GBps"])
        r["busbw_over_link"] = busbw_over_link(r["busbw_GBps"], result)
    result["traffic_rule"] = getattr(traffic_rule, "__name__", repr(traffic_rule))
    result["units"]["busbw"] = "traffic_rule(bytes, p) / time_s for allreduce; = algbw for p2p"
    result["ratios"] = ratios(result)
    return result


def link_rate_GBps(result):
    """The rate of the link the ranks talked over, GB/s (1e9 bytes/s); None on one host."""
    rate = (result.get("link") or {}).get("rate_bps")
    return rate / 8 / 1e9 if rate else None


def link_bandwidth(result):
    """(GB/s, what it is): the bandwidth each way that bounds an allreduce of `result`'s ranks. The
    shaped link's rate where the ranks ran on the local cluster with a network; elsewhere the
    point-to-point bandwidth the benchmark measured between its two ranks (the 'link' of ranks on
    one host is its memory)."""
    rate = link_rate_GBps(result)
    if rate:
        return rate, tr("the rate of the {link} link between the nodes", link=result["link"]["profile"])
    p2p = next((r for r in result["results"] if r["path"] == "p2p"), None)
    if p2p is None:
        raise ValueError("no link and no point-to-point measurement in this result (one rank?)")
    return p2p["algbw_GBps"], tr("the point-to-point bandwidth measured between the two ranks (no network)")


def busbw_over_link(busbw_GBps, result):
    """Bus bandwidth as a fraction of the link's rate: the physical limit of one rank's traffic."""
    return stats.ratio_or_none(busbw_GBps, link_rate_GBps(result))


def has_busbw(result):
    return all("busbw_GBps" in r for r in result["results"])


def ratios(result):
    """Per message size: ChainerMN busbw / raw MPI busbw, and each busbw / P2P bandwidth."""
    by_size = {}
    for r in result["results"]:
        by_size.setdefault(r["bytes"], {})[r["path"]] = r["busbw_GBps"]

    def ratio(bw, a, b):
        return stats.ratio_or_none(bw.get(a), bw.get(b))

    return [{"bytes": size, "chainermn_over_mpi4py": ratio(bw, "chainermn", "mpi4py"),
             "chainermn_over_p2p": ratio(bw, "chainermn", "p2p"),
             "mpi4py_over_p2p": ratio(bw, "mpi4py", "p2p"),
             "chainermn_over_mpi4py_inplace": ratio(bw, "chainermn", IN_PLACE_PATH)}
            for size, bw in sorted(by_size.items())]
