"""The rules of a check, built once from the site table and the course's settings and handed to
the verdicts (handson_lib.verdicts.rules.Rules): the one place the checks read them.
"""

from handson_lib import launch, settings
from handson_lib.sites.table import get_site, site_key
from handson_lib.verdicts.rules import Rules


def grading_site(site=None):
    """The key of the site whose thresholds apply: `site`, else HANDSON_SITE, else local."""
    return site_key(site or settings.current().grader.site or "local")


def site_thresholds(site=None):
    """The grading thresholds of a site (`--site`, else HANDSON_SITE, else local) from the site
    table: min_throughput_ratio, min_accuracy, min_scaling_ratio, throughput_bands, speedup_bands.
    ValueError naming the valid sites."""
    return get_site(grading_site(site)).thresholds.as_dict()


def credit_bands(against, site=None):
    """(floor, share of the points) bands of the site: of the ratio to the reference, or of the
    student's own speed-up in self mode."""
    return site_thresholds(site)["throughput_bands" if against == "reference" else "speedup_bands"]


def rules_for(against, site=None, min_throughput_ratio=None, min_accuracy=None, min_scaling_ratio=None):
    """The Rules of one check: the site's thresholds (an argument given overrides its own), the
    mode, and what the course's settings and this machine say (under the autograder, over TCP)."""
    from handson_lib.checking.runs import transport
    from handson_lib.runtime.devices import nccl_status
    limits = site_thresholds(site)
    given = {"min_throughput_ratio": min_throughput_ratio, "min_accuracy": min_accuracy,
             "min_scaling_ratio": min_scaling_ratio}
    chosen = {k: limits[k] if v is None else v for k, v in given.items()}
    return Rules(site=grading_site(site), against=against, throughput_bands=tuple(limits["throughput_bands"]),
                 speedup_bands=tuple(limits["speedup_bands"]), chainer_updater_possible=nccl_status()[0],
                 autograding=settings.current().grader.autograding, slot_patience=launch.SLOT_PATIENCE,
                 ranks_over_tcp=bool(transport()), **chosen)
