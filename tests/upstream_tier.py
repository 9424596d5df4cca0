"""Chainer's own tests at v7.8.1 as the oracle of the course's patches (`make test-upstream`).

    .venv/bin/python tests/upstream_tier.py [--stack NAME=PYTHON ...] [--subset ci|all] [--out DIR]

`../shared/upstream/chainer-7.8.1-tests.tar.gz` holds Chainer's and ChainerMN's test suites; they run
from a temporary folder outside the project (never copied into it), CPU-only (MARKERS), against each
stack's installed, patched Chainer. The first stack is the baseline (Python 3.11 + NumPy 1.23.5):
a test that passes there and not on another stack is a regression, unless KNOWN names it with the
reason no patch fixes it. `--subset ci` runs CI_SUBSET (what the course, its notebooks and a
student's plausible code use; tests/test_upstream.py in the slow tier); `--subset all` every group
of GROUPS (README "Tests": its time). Prints the counts per group and stack, writes one JSON per
stack into OUT, exits 1 on a regression.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARBALL = "chainer-7.8.1-tests.tar.gz"
#: Chainer's markers (chainer/testing/attr.py): no GPU here, no iDeep (ideep4py has no wheel for
#: Python 3.8+: its tests fail alike on every stack), and `slow` is Chainer's own long tier.
MARKERS = "not gpu and not cudnn and not slow and not ideep"
#: The groups the course's users touch, as Chainer's folders.
GROUPS = {
    "functions": "tests/chainer_tests/functions_tests",
    "links": "tests/chainer_tests/links_tests",
    "optimizers": "tests/chainer_tests/optimizers_tests",
    "serializers": "tests/chainer_tests/serializers_tests",
    "iterators": "tests/chainer_tests/iterators_tests",
    "training": "tests/chainer_tests/training_tests",
    "chainermn": "tests/chainermn_tests",
}
#: What the course, its notebooks and a student's plausible code use (Task #1 and #2's CNNs, the
#: MNIST MLP, batch normalisation, resize_images, as_strided, the optimizers, save/load, the
#: iterators, the trainer's extensions, ChainerMN's naive communicator), small enough for CI (about
#: 20 s a stack here); softmax_cross_entropy's and accuracy's 7,000 cases (30 s) run in the whole suite.
CI_SUBSET = (
    "tests/chainer_tests/functions_tests/array_tests/test_as_strided.py",
    "tests/chainer_tests/functions_tests/array_tests/test_resize_images.py",
    "tests/chainer_tests/functions_tests/activation_tests/test_relu.py",
    "tests/chainer_tests/functions_tests/pooling_tests/test_max_pooling_2d.py",
    "tests/chainer_tests/links_tests/connection_tests/test_linear.py",
    "tests/chainer_tests/links_tests/normalization_tests/test_batch_normalization.py",
    "tests/chainer_tests/optimizers_tests/test_optimizers.py",
    "tests/chainer_tests/serializers_tests/test_npz.py",
    "tests/chainer_tests/iterators_tests/test_serial_iterator.py",
    "tests/chainer_tests/training_tests/extensions_tests/test_evaluator.py",
    "tests/chainer_tests/training_tests/extensions_tests/test_snapshot.py",
    "tests/chainermn_tests/datasets_tests/test_scatter.py",
    "tests/chainermn_tests/optimizer_tests/test_multi_node_optimizer.py",
    "tests/chainermn_tests/links_tests/test_batch_normalization.py",
)
#: Failures on NumPy 2 that no patch of Chainer fixes (the test itself fails, Chainer's result is
#: right): test id pattern (fnmatch) -> the reason.
KNOWN = {
    "tests.chainer_tests.functions_tests.loss_tests.test_softmax_cross_entropy.TestSoftmaxCrossEntropy_*"
    "dtype=float16*shape_ignore=((300000, 2), None)*::test_forward":
        "the test's expected value sums 300000 float16 terms into a Python float: under NumPy 2's "
        "promotion (NEP 50) the sum stays float16, overflows and gives nan; Chainer's loss (2.402 on "
        "the same data, 2.403 in float64) is right",
    "tests.chainer_tests.serializers_tests.test_npz.TestDictionarySerializer::test_serialize_none":
        "the test itself reads numpy.object (removed in NumPy 1.24) to check the dtype Chainer "
        "wrote, which is `object` on both stacks",
    "tests.chainer_tests.functions_tests.math_tests.test_det.DetFunctionTest*":
        "the test itself calls float() on a 1-element 1-d array (test_det.py:92), which NumPy 2.5 refuses",
    "tests.chainer_tests.functions_tests.math_tests.test_sparse_matmul*float16*":
        "SciPy >= 1.14 (the only SciPy with wheels for NumPy 2 and Python 3.13) refuses float16 sparse "
        "matrices: F.sparse_matmul in float16 on the CPU fails there; float32 and float64 pass. Not "
        "patched: nothing in the course or a student's plausible code multiplies float16 sparse matrices",
    "tests.chainer_tests.functions_tests.array_tests.test_pad_sequence*dtype=uint*pad=-1*":
        "F.pad_sequence(padding=-1) for uint8 and uint16: NumPy 2 (NEP 50) refuses an out-of-range Python int where "
        "NumPy 1 silently wrapped it to 255; left to NumPy 2, an error being better than a silent wrap",
}


def tarball():
    """The suite's tarball: $HANDSON_UPSTREAM_TESTS, else ../shared/upstream/ beside this checkout or
    beside the checkout it was cloned from (a fresh clone in /tmp, as the CI check makes)."""
    named = os.environ.get("HANDSON_UPSTREAM_TESTS")
    if named:
        return Path(named)
    places = [ROOT.parent]
    origin = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                            capture_output=True, text=True).stdout.strip()
    if origin and not origin.startswith(("http", "git@", "ssh:")):
        places.append(Path(origin.removeprefix("file://")).resolve().parent)
    for place in places:
        path = place / "shared" / "upstream" / TARBALL
        if path.exists():
            return path
    return None


def extract(dest):
    """The suite unpacked into `dest`; returns its root (the folder holding `tests/`)."""
    path = tarball()
    if path is None or not path.exists():
        raise FileNotFoundError(f"{TARBALL} not found: set HANDSON_UPSTREAM_TESTS or put it in ../shared/upstream/")
    with tarfile.open(path) as tar:
        tar.extractall(dest, filter="data")
    return Path(dest) / "chainer-7.8.1-tests"


def stable_id(test_id):
    """A test id that names the same test on NumPy 1 and 2 and in every run: no lambda's address,
    no random array's values, NumPy 2's scalar repr (`np.float32(1.5)`) and `bool` as NumPy 1's."""
    test_id = re.sub(r" at 0x[0-9a-f]+>", " at 0x>", test_id)
    test_id = re.sub(r"array\((?:.|\n)*?\)(?=[,}])", "array(...)", test_id)
    test_id = re.sub(r"np\.(?:float|int|uint|complex|bool)\w*\(([^()]*)\)", r"\1", test_id)
    return re.sub(r"\bbool_\b", "bool", test_id)


def outcomes_of(junit):
    """{test id: 'passed' | 'failed' | 'skipped'} from pytest's JUnit XML (an error counts as failed).
    Ids that name a lambda lose its address (`<function <lambda> at 0x...>` differs between runs)."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        key = stable_id(f"{case.get('classname')}::{case.get('name')}")
        tags = {child.tag for child in case}
        found[key] = ("failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags
                      else "passed")
    return found


def jobs_of(suite, paths, workers):
    """`paths` as pytest runs: Chainer's files in `workers` parts of about equal size, ChainerMN's
    apart (its conftest sets the start method `forkserver` for the whole session)."""
    files = []
    for path in paths:
        found = Path(suite) / path
        files += sorted(found.rglob("test_*.py")) if found.is_dir() else [found]
    chainermn = [f for f in files if "chainermn_tests" in f.parts]
    parts = [[] for _ in range(max(1, workers))]
    sizes = [0] * len(parts)
    for f in sorted(set(files) - set(chainermn), key=lambda f: -f.stat().st_size):
        i = sizes.index(min(sizes))
        parts[i].append(f)
        sizes[i] += f.stat().st_size
    jobs = [part for part in parts if part] + ([chainermn] if chainermn else [])
    return [[str(f.relative_to(suite)) for f in sorted(job)] for job in jobs]


def run(python, suite, paths, scratch, workers=1):
    """Run `paths` of the suite with `python`, `workers` pytest processes at once; returns
    (outcomes, seconds, pytest's last lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI")}
    env.update(OMP_NUM_THREADS="1", CHAINER_DATASET_ROOT=str(Path(scratch) / "datasets"))
    started, waiting, running, outcomes, tails = time.monotonic(), jobs_of(suite, paths, workers), [], {}, []
    while waiting or running:
        while waiting and len(running) < max(1, workers):
            junit = Path(scratch) / f"job{len(waiting)}-{time.monotonic_ns()}.xml"
            cmd = [str(python), "-m", "pytest", *waiting.pop(0), "-m", MARKERS, "-q", "-p", "no:cacheprovider",
                   "--timeout", "600", "--continue-on-collection-errors", "--junitxml", str(junit),
                   "-o", "junit_family=xunit1"]
            with open(junit.with_suffix(".log"), "w") as log:   # a file: a full pipe would stall the run
                running.append((subprocess.Popen(cmd, cwd=suite, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL), junit))
        proc, junit = running.pop(0)
        proc.wait()
        output = junit.with_suffix(".log").read_text(errors="replace")
        tails.append("\n".join(output.rstrip().splitlines()[-2:]))
        if not junit.exists():
            raise RuntimeError(f"pytest wrote no results (exit {proc.returncode}):\n{output[-3000:]}")
        outcomes.update(outcomes_of(junit))
    return outcomes, time.monotonic() - started, "\n".join(tails)


def group_of(test_id):
    path = test_id.split("::")[0].replace(".", "/")
    return next((name for name, folder in GROUPS.items() if path.startswith(folder)), "other")


def counts(outcomes):
    """{group: {'passed': n, 'failed': n, 'skipped': n}}."""
    table = {}
    for test_id, outcome in outcomes.items():
        row = table.setdefault(group_of(test_id), {"passed": 0, "failed": 0, "skipped": 0})
        row[outcome] += 1
    return table


def known_reason(test_id):
    return next((why for pattern, why in KNOWN.items() if fnmatch.fnmatchcase(test_id, pattern)), None)


def regressions(baseline, other):
    """(unexplained, explained): tests that pass on the baseline and not on `other`; explained ones
    as {id: reason} from KNOWN."""
    lost = sorted(t for t, outcome in baseline.items() if outcome == "passed" and other.get(t) != "passed")
    explained = {t: known_reason(t) for t in lost if known_reason(t)}
    return [t for t in lost if t not in explained], explained


def default_stacks():
    """name -> python: this checkout's venvs that exist (3.11 first: the baseline)."""
    found = {"3.11": ROOT / ".venv" / "bin" / "python", "3.12": ROOT / ".venv-py312" / "bin" / "python",
             "3.13": ROOT / ".venv-py313" / "bin" / "python"}
    return {name: path for name, path in found.items() if path.exists()}


def stack_label(python):
    return subprocess.run([str(python), "-c", "import sys, numpy; print(sys.version.split()[0], "
                           "'+ NumPy', numpy.__version__)"], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def run_stacks(stacks, paths, out, workers=1):
    """Every stack on `paths`; returns {name: {'label', 'outcomes', 'seconds'}}, each also as OUT/NAME.json."""
    results = {}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chainer-upstream-") as tmp:
        suite = extract(tmp)
        for name, python in stacks.items():
            label = stack_label(python)
            print(f"--- {name} ({label}): {len(paths)} path(s)", flush=True)
            outcomes, seconds, tail = run(python, suite, paths, tmp, workers)
            print(tail, flush=True)
            results[name] = {"label": label, "seconds": round(seconds, 1), "outcomes": outcomes}
            (out / f"{name}.json").write_text(json.dumps(results[name], indent=0, sort_keys=True))
    return results


def report(results):
    """The counts table and each stack's regressions against the first; returns the unexplained ones."""
    names = list(results)
    lines = ["| group | " + " | ".join(f"{n}: {results[n]['label']} (passed / failed / skipped)" for n in names)
             + " |", "|---|" + "---|" * len(names)]
    tables = {n: counts(results[n]["outcomes"]) for n in names}
    for group in [*GROUPS, "other"]:
        if any(group in t for t in tables.values()):
            cells = [tables[n].get(group, {"passed": 0, "failed": 0, "skipped": 0}) for n in names]
            lines.append(f"| {group} | " + " | ".join(f"{c['passed']} / {c['failed']} / {c['skipped']}"
                                                       for c in cells) + " |")
    lines.append("| seconds | " + " | ".join(str(results[n]["seconds"]) for n in names) + " |")
    unexplained = {}
    for name in names[1:]:
        lost, explained = regressions(results[names[0]]["outcomes"], results[name]["outcomes"])
        unexplained[name] = lost
        lines.append(f"\n{name}: {len(lost)} regression(s) against {names[0]}, {len(explained)} known")
        lines += [f"  REGRESSION {t}" for t in lost[:50]]
        lines += [f"  known {t}: {why}" for t, why in explained.items()]
    print("\n".join(lines), flush=True)
    return unexplained


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", action="append", default=[], metavar="NAME=PYTHON",
                        help="a stack to run (repeatable; the first is the baseline); default: .venv, "
                             ".venv-py312, .venv-py313 where they exist")
    parser.add_argument("--subset", choices=("ci", "all"), default="all")
    parser.add_argument("--group", action="append", choices=list(GROUPS), default=[],
                        help="with --subset all: only these groups (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per stack")
    parser.add_argument("--out", default=str(ROOT / "results" / "upstream"))
    parser.add_argument("--report", metavar="DIR", help="report the results an earlier run wrote into DIR (no run)")
    args = parser.parse_args(argv)
    if args.report:
        names = [p.stem for p in sorted(Path(args.report).glob("*.json"))]
        results = {n: json.loads((Path(args.report) / f"{n}.json").read_text()) for n in names}
        for r in results.values():
            r["outcomes"] = {stable_id(k): v for k, v in r["outcomes"].items()}
        return 1 if any(report(results).values()) else 0
    stacks = dict(s.split("=", 1) for s in args.stack) if args.stack else default_stacks()
    paths = list(CI_SUBSET) if args.subset == "ci" else [GROUPS[g] for g in (args.group or GROUPS)]
    started = time.monotonic()
    results = run_stacks(stacks, paths, args.out, workers=args.workers)
    unexplained = report(results)
    print(f"upstream tier: {time.monotonic() - started:.0f} s", flush=True)
    return 1 if any(unexplained.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
