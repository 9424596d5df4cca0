"""The points of the speed checks in their report's bands (partial credit).
"""

from handson_lib.messages import tr


#: Marks the line that the course's grader reads back from the graded notebooks.
RATIO_TAG = "handson-throughput-ratios:"


def band_share(ratio, bands):
    """Share of the points for a ratio to the reference: the first band whose floor it reaches."""
    for floor, share in bands:
        if ratio is not None and ratio >= floor:
            return share
    return 0.0


def throughput_credit(report, points, print_fn=print):
    """Points for the speed checks of a report, in the bands it was judged in (`report.bands`:
    ratios to the reference, or the student's own speed-ups in self mode; partial credit).

    The grade cell's last value is this number: nbgrader gives it as the cell's score. With no
    credit at all it raises, so that the feedback shows why."""
    bands = report.bands
    speed = report.speed_checks
    if not speed:
        raise AssertionError(tr("throughput not measured: the run did not finish"))
    wrong = [c for c in report.checks if c not in speed and not c.passed]
    if wrong:
        raise AssertionError(tr("throughput is scored only for a correct run; first fix:") + "\n"
                             + "\n".join(c.line() for c in wrong))
    shares = [band_share(c.value, bands) for c in speed]
    credit = round(points * sum(shares) / len(shares), 2)
    if report.tag_ratios:   # read back from the graded notebook by the grader's report; no student's line
        print_fn(RATIO_TAG + " " + " ".join(f"{c.name.split()[0]}={c.value if c.value is not None else 'nan'}"
                                            for c in speed))
    measure = tr("ratio to the reference") if report.against == "reference" else tr("speed-up over your own run")
    bands_text = measure + " " + tr(", ").join(tr(">= {floor:.2f}: {share:.0%}", floor=floor, share=share)
                                               for floor, share in bands)
    for check, share in zip(speed, shares):
        print_fn(tr("{line}  -> {share:.0%} of the points (bands {bands})", line=check.line(), share=share,
                    bands=bands_text))
    if credit == 0:
        raise AssertionError(tr("no throughput credit:") + "\n" + "\n".join(c.line() for c in speed))
    return credit
