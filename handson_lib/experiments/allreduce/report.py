"""An allreduce result shown: the nccl-tests-like table with the ratios (its prose in the reader's
language) and the bandwidth figure."""

from handson_lib.experiments.allreduce.bandwidth import has_busbw, link_rate_GBps, ratios
from handson_lib.experiments.allreduce.units import (IN_PLACE_PATH, PATH_LABELS, PATHS, gbps_to_gibitps,
                                                     human_bytes)
from handson_lib.messages import tr
from handson_lib.plotting import pyplot

def report_title(result):
    return f"allreduce on {result['ranks']} ranks ({result.get('model') or 'sizes'})"


def _fmt_ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


def format_table(result):
    """The nccl-tests-like table, then the ratios, as one string (its prose in the reader's
    language, HANDSON_LANG; the column headers and numbers as they are)."""
    bus = has_busbw(result)
    lines = _heading_lines(result, bus) + _table_lines(result, bus)
    pair = result.get("p2p_pair") or [0, 1]
    if bus:
        lines.append(tr("point to point between ranks {first} and {second}: busbw = algbw = bytes / "
                        "(round trip / 2); calls = MPI_Allreduce calls per iteration (ChainerMN: one per "
                        "parameter array)", first=pair[0], second=pair[1]))
    else:
        lines.append(tr("no busbw: measure(..., traffic_rule=...) adds it; calls = MPI_Allreduce calls per "
                        "iteration (ChainerMN: one per parameter array)"))
    lines += _ratio_lines(result, bus)
    for r in result["results"]:
        if not r["correct"]:
            lines.append(tr("ERROR: {path} at {bytes} bytes gave a wrong result in {failed} of {checks} "
                            "checks (max error {error:g})", path=r['path'], bytes=r['bytes'],
                            failed=r['failed_checks'], checks=r['checks'], error=r['max_error']))
    return "\n".join(lines)


def _heading_lines(result, bus):
    """What was measured where: ranks and hosts, the gradients, the link, the machine's load."""
    hosts = result.get("hosts") or []
    lines = [tr("allreduce benchmark: {ranks} rank(s) on {n_hosts} host(s) ({hosts}), communicator "
                "{communicator}, {iterations} timed iterations after {warmup} warm-up",
                ranks=result['ranks'], n_hosts=len(hosts), hosts=', '.join(hosts),
                communicator=result.get('communicator', 'naive'), iterations=result['iterations'],
                warmup=result['warmup'])]
    if result.get("model"):
        traffic = next((r["traffic_bytes"] for r in result["results"] if r["path"] != "p2p"), None) \
            if bus else None
        if traffic is not None:
            lines.append(tr("gradients of {model}: L = {bytes:,} bytes ({size}); allreduce traffic per "
                            "rank = {traffic:,.0f} bytes", model=result['model'], bytes=result['bytes'],
                            size=human_bytes(result['bytes']), traffic=traffic))
        else:
            lines.append(tr("gradients of {model}: L = {bytes:,} bytes ({size})", model=result['model'],
                            bytes=result['bytes'], size=human_bytes(result['bytes'])))
    link = result.get("link") or {}
    if link.get("rate_bps"):
        lines.append(tr("link between nodes: {profile} ({note}), shaped to {gbit:g} Gbit/s = {rate:.3f} "
                        "GB/s each way per node; busbw / link = the share of that limit the path reached",
                        profile=link['profile'], note=link.get('note'), gbit=link['rate_bps'] / 1e9,
                        rate=link_rate_GBps(result)))
    if len(hosts) == 1:
        lines.append(tr("all ranks share one host: the bytes move through shared memory, not a network"))
    return lines + _load_lines(result)


def _load_lines(result):
    load, load_end = result.get("load_average"), result.get("load_average_end")
    if load and load_end:
        return [tr("load average {start:.2f} at the start, {end:.2f} at the end, on {cpus} CPU(s): a "
                   "load above the CPU count means other processes shared them and the times are "
                   "noisy", start=load[0], end=load_end[0], cpus=result.get('cpu_count'))]
    if load:
        return [tr("load average {start:.2f} at the start, on {cpus} CPU(s): a load above the CPU "
                   "count means other processes shared them and the times are noisy",
                   start=load[0], cpus=result.get('cpu_count'))]
    return []


def _table_lines(result, bus):
    """The header, its rule and one row per path and size."""
    over_link = bus and link_rate_GBps(result)
    header = (f"{'path':14s} {'bytes':>12s} {'calls':>5s} {'iters':>5s} {'median ms':>10s} "
              f"{'min ms':>9s} {'max ms':>9s} {'algbw GB/s':>10s}"
              + (f" {'busbw GB/s':>10s} {'busbw Gibit/s':>13s}" if bus else "")
              + (f" {'busbw/link':>10s}" if over_link else "") + f" {'correct':>7s}")
    lines = [header, "-" * len(header)]
    for r in result["results"]:
        lines.append(
            f"{r['path']:14s} {r['bytes']:12d} {r['calls']:5d} {r['iterations']:5d} "
            f"{r['time_s'] * 1e3:10.3f} {r['min_s'] * 1e3:9.3f} {r['max_s'] * 1e3:9.3f} "
            f"{r['algbw_GBps']:10.3f}"
            + (f" {r['busbw_GBps']:10.3f} {r['busbw_Gibps']:13.3f}" if bus else "")
            + (f" {_fmt_ratio(r.get('busbw_over_link')):>10s}" if over_link else "")
            + f" {'yes' if r['correct'] else 'NO':>7s}")
    return lines


def _ratio_lines(result, bus):
    """Per message size: ChainerMN against raw MPI, and both against point to point."""
    lines = []
    for row in result.get("ratios") or (ratios(result) if bus else []):
        fields = dict(size=human_bytes(row['bytes']), mpi=_fmt_ratio(row['chainermn_over_mpi4py']),
                      chainermn_p2p=_fmt_ratio(row['chainermn_over_p2p']),
                      mpi_p2p=_fmt_ratio(row['mpi4py_over_p2p']))
        if row.get("chainermn_over_mpi4py_inplace") is not None:
            lines.append(tr("{size:>10s}: ChainerMN busbw / raw MPI busbw = {mpi}; busbw / P2P: ChainerMN "
                            "{chainermn_p2p}, raw MPI {mpi_p2p}; ChainerMN / raw MPI IN_PLACE = {inplace}",
                            inplace=_fmt_ratio(row['chainermn_over_mpi4py_inplace']), **fields))
        else:
            lines.append(tr("{size:>10s}: ChainerMN busbw / raw MPI busbw = {mpi}; busbw / P2P: ChainerMN "
                            "{chainermn_p2p}, raw MPI {mpi_p2p}", **fields))
    return lines


def bandwidth_figure(result, ax=None):
    """Bus bandwidth vs message size for the ChainerMN and raw MPI paths, with the P2P line
    (algbw where the result has no busbw: `add_bus_bandwidth`)."""
    plt = pyplot()
    kind = "busbw" if has_busbw(result) else "algbw"
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
    else:
        fig = ax.figure
    styles = {"chainermn": {"marker": "o", "linestyle": "-", "color": "#4C72B0"},
              "mpi4py": {"marker": "s", "linestyle": "-", "color": "#DD8452"},
              IN_PLACE_PATH: {"marker": "D", "linestyle": ":", "color": "#55A868"},
              "p2p": {"marker": "^", "linestyle": "--", "color": "black"}}
    for path in (*PATHS[:2], IN_PLACE_PATH, PATHS[2]):
        points = sorted((r["bytes"], r[f"{kind}_GBps"], r["correct"])
                        for r in result["results"] if r["path"] == path)
        if not points:
            continue
        sizes = [s for s, _, _ in points]
        values = [v for _, v, _ in points]
        name = PATH_LABELS[path] + (" (bandwidth)" if path == "p2p" else f" ({kind})")
        if path == "p2p" and len(sizes) == 1:
            # One message size: the P2P limit as a line across, to read the points against.
            ax.axhline(values[0], linestyle="--", color="black", label=name)
        else:
            ax.plot(sizes, values, label=name, **styles[path])
        wrong = [(s, v) for s, v, ok in points if not ok]
        if wrong:
            ax.plot(*zip(*wrong), "x", color="red", markersize=12, label=f"{path}: WRONG result")
    rate = link_rate_GBps(result)
    if rate:
        ax.axhline(rate, linestyle=":", color="#C44E52", linewidth=2,
                   label=f"link rate: {result['link']['profile']} ({rate:.3g} GB/s each way)")
    ax.set_xscale("log", base=2)
    sizes = sorted({r["bytes"] for r in result["results"]})
    if len(sizes) <= 12:
        ax.set_xticks(sizes, [human_bytes(s).replace(".0 ", " ") for s in sizes], fontsize=8)
        ax.minorticks_off()
    ax.set_xlabel("message size")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bandwidth [GB/s]")
    ax.secondary_yaxis("right", functions=(gbps_to_gibitps, lambda g: g * 2 ** 30 / 8e9)) \
        .set_ylabel("[Gibit/s]")
    title = (f"allreduce busbw = traffic per rank / time, {result['ranks']} ranks" if kind == "busbw"
             else f"allreduce algbw = bytes / time, {result['ranks']} ranks")
    if result.get("model"):
        title += f", {result['model']} gradients"
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
