"""Grading core shared by `handson check`, the notebooks' hidden tests and the autograder.

A student's script is run under the instrumenting launcher (handson_lib.harness.observe) with a
watchdog; each check reads what the launcher observed, never the script's own printout.

Throughput is judged in one of two modes (`against`):
  - "reference": a ratio to the reference solution, their training steps timed in turn by the
    grader (handson_lib.checking.paired; the instructor's checkout and the autograder: the student
    edition lacks the reference solutions);
  - "self": the speed-up of the student's N-device run over their own one-device run, against the
    site's `speedup_bands` (the student edition, which has no reference solution).
"""

import ast
import importlib.util
import json
import re
import secrets
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy

from handson_lib import COURSE_ROOT, grader_settings, launch, tasks
from handson_lib.checking import evidence, source_review
from handson_lib.checking.paired import Baseline, run_paired
from handson_lib.checking.runs import argument, run_observed, run_observed_mpi
from handson_lib.messages import tr
from handson_lib.sites import jobscript
from handson_lib.sites.table import EXERCISE_SITES, SITES, get_site, ranks_per_node, site_key

#: How throughput is judged (see the module's docstring).
AGAINST = ("reference", "self")

#: Names of the checks that judge speed (scored in bands by `throughput_credit`) start with these.
SPEED_CHECKS = ("throughput", "scaling")

#: Marks the line that the course's grader reads back from the graded notebooks.
RATIO_TAG = "handson-throughput-ratios:"

#: Small, quick runs on the offline synthetic data.
MULTI_GPU_ARGS = list(tasks.task("multi-gpu").run_args)
#: Task #2's correctness run (and the notebook's runs): enough steps to beat min_accuracy surely
#: (4 epochs: 0.63-0.70 over 10 runs on 2 ranks; after 3 the accuracy still swings, 0.18-0.68).
MULTI_NODE_ARGS = list(tasks.task("multi-node").run_args)
#: Task #2's timing (handson_lib.checking.paired): the training steps of the reference and of the
#: student in turn; only the data set's size differs from the correctness run (less to set up).
TIMING_ARGS = ["--train-size", "640", "--test-size", "64", "--batchsize", "32", "--no-progress"]
TIMED_STEPS = 16
MNIST_ARGS = list(tasks.task("mnist-multi-node").run_args)  # accuracy 0.88-0.92 already: the rest is start-up

#: How a check begins where the run's records contradict what the grader measured itself: no
#: points, and the course's grader names the check in the student's status.
TAMPERING = "tampering suspected, for the instructor to review: "

# What the run's processes record (observed.json, the workers' and ranks' arrays) is a claim: it
# can fail a check, never pass one alone. Each pass rests as well on what the grader sees itself:
#   - the seed: the grader picks the data's seed of every correctness run (`grader_seed`), and
#     evaluates the trained model on held-out images of that seed (checking.evidence): a model
#     trained before the run does not fit its classes;
#   - the run's processes seen from outside (launch.OutsideView): the CPU they used against the
#     same training's (`RUN_WORK_SHARE`), how many of them computed (Task #1's workers), and in
#     the grading sandbox the bytes the ranks sent each other (Task #2: averaging the gradients
#     moves about 2L(p-1) bytes an iteration, `AVERAGING_SHARE`; ranks that train alone, none);
#   - the script as handed in (checking.source_review): no atexit, os._exit, launcher files ...
#: The least CPU a run may take, as a share of what the same training took its baseline (the
#: reference's run, or the student's own 1-device / 1-rank run), seen from outside.
RUN_WORK_SHARE = 0.4
#: The least the ranks must send each other, as a share of what averaging the gradients moves.
AVERAGING_SHARE = 0.3


#: Self mode (no reference to measure first): seconds without a training iteration, start-up
#: included, before a run is stopped as stalled (a deadlock costs this, not the whole limit).
SELF_STALL = 90.0
#: The rest of the machine keeping this many cores busy during a self-mode timing is a load worth
#: naming beside a failed speed-up.
BUSY_CORES = 0.5
#: Self mode: steps on n devices (or ranks) that got less than this share of n times the CPU of the
#: steps on 1 were held back by the machine's load, not by the script: their speed-up is judged
#: per core they got (a busy 2-core machine gave a correct script 0.9-1.0x on 2 devices, and its
#: 2-device steps 1.05 times the CPU of its 1-device steps).
LOAD_LIMITED_SHARE = 0.85


def grader_seed():
    """The data's seed of a correctness run: drawn by the grader for each run (synthetic data: its
    classes; every set: the order and the first weights)."""
    return 1 + secrets.randbelow(2 ** 31 - 2)

def site_thresholds(site=None):
    """The grading thresholds of a site (`--site`, else HANDSON_SITE, else local) from the site
    table: min_throughput_ratio, min_accuracy, min_scaling_ratio, throughput_bands, speedup_bands.
    ValueError naming the valid sites."""
    return get_site(grading_site(site)).thresholds.as_dict()


def grading_site(site=None):
    """The key of the site whose thresholds apply: `site`, else HANDSON_SITE, else local."""
    return site_key(site or grader_settings.current().site or "local")


def default_against(reference_name="train_cifar_multi_gpu.py"):
    """"reference" where the reference solution can be measured (the instructor's checkout and the
    grader, which hold the reference and its measuring code), else "self"."""
    if importlib.util.find_spec("handson_lib.checking.reference") is None:   # the student edition
        return "self"
    from handson_lib.checking import reference  # instructor-only: absent from the student edition
    return "reference" if reference.available(reference_name) else "self"


def _resolve_against(against, reference, reference_name):
    """The mode of one check: as asked, "reference" when a measured reference is passed in, else
    the default of this installation."""
    if against is None:
        against = "reference" if reference is not None else default_against(reference_name)
    if against not in AGAINST:
        raise ValueError(tr("unknown mode against={against!r}; choose one of {choices}",
                            against=against, choices=", ".join(AGAINST)))
    if against == "reference" and reference is None and default_against(reference_name) != "reference":
        raise ValueError(tr("judging against the reference needs the reference solution {name} (the "
                            "instructor's checkout); this installation has none: use --against self",
                            name=reference_name))
    return against


def _measure_reference(name, args, timeout, np=None):
    from handson_lib.checking import reference  # instructor-only: absent from the student edition
    return reference.measure_reference(name, args, timeout, np=np)


def _reference_script(name):
    from handson_lib.checking import reference  # instructor-only: absent from the student edition
    return reference.reference_script(name)


def student_limit(reference, timeout, factor=5.0, floor=60.0):
    """The watchdog for a student's run: `factor` times the reference's own time in this session
    (at least `floor` seconds, at most `timeout`): a deadlock costs a minute, not the whole limit."""
    if reference is None or not reference.finished:
        return timeout
    return min(timeout, max(floor, factor * reference.seconds))


def student_stall(reference, factor=4.0, floor=15.0):
    """Seconds without a training iteration after which a student's run is stopped early:
    `factor` times the reference's longest wait in this session (start-up included, at least
    `floor`); None (only the time limit) without a finished reference."""
    progress = getattr(reference, "progress", None) or {}
    waits = [w for w in (progress.get("first_progress"), progress.get("longest_gap")) if w]
    if reference is None or not reference.finished or not waits:
        return None
    return max(floor, factor * max(waits))


def locate(script_name):
    """Where a task script is: next to the notebook, else in ../exercises (student release).

    Under the autograder only the file handed in next to the notebook counts: HANDSON_GRADING is
    the submission's folder (the grader sets it per student, so that a cell changing
    the working directory cannot point the checks at other scripts), or 1 for the folder the
    kernel works in (nbgrader's own CLI)."""
    grading = grader_settings.current().submission
    if grading == grader_settings.KERNEL_FOLDER:
        candidates = [Path.cwd() / script_name]
    elif grading:
        candidates = [Path(grading) / script_name]
    else:
        candidates = [Path.cwd() / script_name, Path.cwd().parent / "exercises" / script_name,
                      COURSE_ROOT / "exercises" / script_name]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    if len(candidates) == 1:
        raise FileNotFoundError(tr("{script} was not handed in: submit it in the same folder as the "
                                   "notebook ({folder}/{script})", script=script_name, folder=candidates[0].parent.name))
    raise FileNotFoundError(tr("{script} not found next to this notebook nor in ../exercises",
                               script=script_name))


#: How each check's name is shown (`check_title`): (the English name as a pattern, its title).
_TITLES = (
    (r"runs to the end", lambda: tr("runs to the end")),
    (r"uses MultiprocessParallelUpdater", lambda: tr("uses MultiprocessParallelUpdater")),
    (r"one worker process per device", lambda: tr("one worker process per device")),
    (r"shards are disjoint", lambda: tr("shards are disjoint")),
    (r"shards cover the training set", lambda: tr("shards cover the training set")),
    (r"parameters equal on all workers", lambda: tr("parameters equal on all workers")),
    (r"parameters identical on every rank", lambda: tr("parameters identical on every rank")),
    (r"evaluator aggregated over ranks", lambda: tr("evaluator aggregated over ranks")),
    (r"reports only on rank 0", lambda: tr("reports only on rank 0")),
    (r"accuracy beats chance", lambda: tr("accuracy beats chance")),
    (r"throughput vs the reference", lambda: tr("throughput vs the reference")),
    (r"throughput: (?P<n>\d+) devices vs your 1-device run",
     lambda n: tr("throughput: {n} devices vs your 1-device run", n=n)),
    (r"scaling 1 -> (?P<n>\d+) ranks vs the reference",
     lambda n: tr("scaling 1 -> {n} ranks vs the reference", n=n)),
    (r"scaling: (?P<n>\d+) ranks vs your 1-rank run", lambda n: tr("scaling: {n} ranks vs your 1-rank run", n=n)),
    (r"job script lint", lambda: tr("job script lint")),
    (r"resources of the task", lambda: tr("resources of the task")),
)


def check_title(name):
    """A check's name as the student reads it, in the student's language (HANDSON_LANG). The
    English name stays the check's identity: code, tests and hidden tests compare `Check.name`."""
    for pattern, title in _TITLES:
        match = re.fullmatch(pattern, name)
        if match:
            return title(**match.groupdict())
    return name


@dataclass
class Check:
    name: str             # the English name: the check's identity (see `title`)
    passed: bool
    message: str          # in the student's language, made when the check is added
    value: float = None   # the measured ratio, for the throughput and scaling checks

    @property
    def title(self):
        """The name as shown, translated (check_title)."""
        return check_title(self.name)

    def line(self):
        # [PASS] / [FAIL] stay in English: scripts and tests look for them.
        return f"  [{'PASS' if self.passed else 'FAIL'}] {self.title}: {self.message}"


@dataclass
class Report:
    task: str
    script: str
    checks: list = field(default_factory=list)
    observed: dict = field(default_factory=dict)
    reference: dict = field(default_factory=dict)
    output_tail: str = ""
    against: str = "reference"   # how throughput was judged: see AGAINST

    @property
    def speed_checks(self):
        return [c for c in self.checks if c.name.startswith(SPEED_CHECKS)]

    @property
    def ok(self):
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failed(self):
        return [c for c in self.checks if not c.passed]

    def add(self, name, passed, message, value=None):
        self.checks.append(Check(name, bool(passed), message, value))

    def passed(self, name):
        """Whether the check `name` is there and passed."""
        return any(c.passed for c in self.checks if c.name == name)

    def overrule(self, name, message):
        """What the grader saw itself fails the check `name` (one the run's records may have passed)."""
        for check in self.checks:
            if check.name == name:
                check.passed, check.message = False, message

    def text(self):
        lines = [f"handson check {self.task} {self.script}"]
        lines += [c.line() for c in self.checks]
        passed = sum(c.passed for c in self.checks)
        if self.ok:
            lines.append(tr("{passed} of {total} checks passed", passed=passed, total=len(self.checks)))
        else:
            lines.append(tr("{passed} of {total} checks passed -- see the FAIL lines above",
                            passed=passed, total=len(self.checks)))
        if not self.ok and self.output_tail:
            lines.append(tr("Last lines of your script's output:"))
            lines += ["  | " + line for line in self.output_tail.splitlines()]
        return "\n".join(lines)

    def to_json(self):
        return json.dumps({"task": self.task, "script": self.script, "ok": self.ok,
                           "checks": [asdict(c) for c in self.checks]}, indent=2)


def _tail(output, lines=15):
    """The last lines of a run's output, without terminal control sequences (Chainer's
    PrintReport and ProgressBar write ESC[J: a report showed `[J` before each line)."""
    from handson_lib.runtime.throughput import ANSI_ESCAPE_RE
    return "\n".join(ANSI_ESCAPE_RE.sub("", output).rstrip().splitlines()[-lines:])


def _stopped_how(obs, timeout):
    """How the watchdog stopped a run: after its time limit, or early once iterations stopped."""
    progress = obs.progress or {}
    if progress.get("stalled"):
        if progress.get("first_progress"):
            return tr("waited {stall:.0f} s for another training iteration and was stopped early by the "
                      "watchdog (after {seconds:.0f} s)", stall=progress["stall"], seconds=obs.seconds)
        return tr("waited {stall:.0f} s for its first training iteration and was stopped early by the "
                  "watchdog (after {seconds:.0f} s)", stall=progress["stall"], seconds=obs.seconds)
    return tr("did not finish within {limit:.0f} s and was stopped by the watchdog", limit=obs.limit or timeout)


def _not_implemented(error):
    """The message of a NotImplementedError (`require_done`: what is still to do)."""
    return tr("not implemented yet: {what}", what=error.split(": ", 1)[1])


def _why_it_stopped(obs, timeout):
    if obs.timed_out:
        return tr("{how} (an infinite loop, or workers waiting for each other?)", how=_stopped_how(obs, timeout))
    error = obs.record.get("error") or ""
    if error.startswith("NotImplementedError"):
        return _not_implemented(error)
    if error:
        return tr("stopped with {error}", error=error)
    if not obs.record:
        return tr("crashed before training started (exit code {code})", code=obs.returncode)
    if not obs.record.get("trainers"):
        return tr("finished without creating a chainer.training.Trainer")
    return tr("exit code {code}", code=obs.returncode)


def _equal_length_padding(shards, sizes, train):
    """The images that scatter_dataset's default force_equal_length=True trains twice, when the
    shards are exactly that: each of ceil(N / n) images, together covering the N training images,
    with n * ceil(N / n) - N images more than N (the windows overlap by that much). None otherwise."""
    if train is None:
        return None
    total, n = len(set(train)), len(shards)
    size = -(-total // n)
    extra = n * size - total
    union = set().union(*shards)
    if extra == 0 or any(s != size for s in sizes) or union != set(train) or sum(sizes) - len(union) != extra:
        return None
    return extra


def _shard_checks(report, record, what="worker"):
    """The shards of the workers (Task #1) or of the ranks (`what="rank"`, Task #2)."""
    shards = [set(s) for s in record.get("shards", [])]
    train = record.get("train_fingerprints")
    sizes = [len(s) for s in record.get("shards", [])]
    who = tr("rank") if what == "rank" else tr("worker")
    if len(shards) < 2:
        report.add("shards are disjoint", False,
                   tr("only {n} {who} iterator(s): nothing was split", n=len(shards), who=who))
        report.add("shards cover the training set", False, tr("not checked: the data was not split"))
        return
    overlap = set().union(*[a & b for i, a in enumerate(shards) for b in shards[i + 1:]])
    padding = _equal_length_padding(shards, sizes, train) if what == "rank" else None
    if overlap and padding is not None:
        report.add("shards are disjoint", True,
                   tr("{n} shards of {size} images; {twice} image(s) in two shards: the padding of "
                      "scatter_dataset's force_equal_length=True ({total} images do not split evenly over {n} "
                      "ranks), no image otherwise twice", n=len(shards), size=sizes[0], twice=padding,
                      total=len(set(train))))
    elif overlap:
        share = len(overlap) / max(1, min(sizes))
        msg = tr("{n} training images are in more than one {who}'s shard ({share:.0%} of the smallest shard)",
                 n=len(overlap), who=who, share=share)
        if share > 0.99 and what == "rank":
            msg = tr("every rank trains on the whole training set: give each rank its own part with "
                     "chainermn.scatter_dataset(train, comm, shuffle=True)")
        elif share > 0.99:
            msg = tr("every worker gets the same images (the whole training set each): split it with "
                     "chainer.datasets.split_dataset_n_random(train, n) and give each worker its own part")
        report.add("shards are disjoint", False, msg)
    else:
        report.add("shards are disjoint", True,
                   tr("{n} shards of {sizes} images, no image twice", n=len(shards), sizes=sizes))
    if train is None:
        report.add("shards cover the training set", False,
                   tr("the script did not load its data with the course's loader (runtime.load_data)"))
        return
    union = set().union(*shards)
    missing = len(set(train) - union)
    if missing:
        report.add("shards cover the training set", False,
                   tr("{missing} of {total} training images are in no shard", missing=missing, total=len(set(train))))
    else:
        report.add("shards cover the training set", True,
                   tr("all {total} training images are used", total=len(set(train))))


def _accuracy_check(report, record, min_accuracy, seen=None):
    """The accuracy of the trained model, as the grader measured it itself (`seen`: the run's
    evidence, checking.evidence) beside what the run recorded: a contradiction is no pass but
    "tampering suspected", for the instructor to review. Without evidence (a run made by hand in
    a test), the record's."""
    acc = record.get("accuracy")
    n_class = record.get("dataset", {}).get("n_class", 10)
    if acc is None:
        report.add("accuracy beats chance", False, tr("no test accuracy could be measured"))
        return
    if seen is None:
        report.add("accuracy beats chance", acc >= min_accuracy,
                   tr("test accuracy {accuracy:.3f} measured by the observer (chance {chance:.2f}, needed "
                      "{needed:.2f})", accuracy=acc, chance=1 / n_class, needed=min_accuracy))
        return
    measured = seen.get("accuracy")
    if measured is None:
        report.add("accuracy beats chance", False,
                   tr("the grader could not evaluate the trained model itself: {why}", why=seen.get("why")))
    elif abs(measured - acc) > evidence.agreement(record.get("dataset", {}).get("n_test") or 1,
                                                 seen.get("images") or 1):
        report.add("accuracy beats chance", False,
                   tr("tampering suspected, for the instructor to review: ")   # TAMPERING, for the catalogue
                   + tr("the run recorded a test accuracy of {recorded:.3f}, the grader measured {measured:.3f} for "
                        "the trained model on {images} images it never trained on", recorded=acc, measured=measured,
                        images=seen.get("images")))
    else:
        report.add("accuracy beats chance", measured >= min_accuracy,
                   tr("test accuracy {accuracy:.3f} measured by the grader on {images} images the run never "
                      "trained on (the run's own: {recorded:.3f}; chance {chance:.2f}, needed {needed:.2f})",
                      accuracy=measured, images=seen.get("images"), recorded=acc, chance=1 / n_class,
                      needed=min_accuracy))


def _contention(*observations):
    """A note for a speed check whose runs went without the machine's timing slot (another
    process held it past launch.SLOT_PATIENCE): their times shared the machine."""
    if any((getattr(obs, "progress", None) or {}).get("contended") for obs in observations if obs is not None):
        return tr(" (timed without the machine to itself: another process held its timing slot longer than "
                  "{seconds:.0f} s)", seconds=launch.SLOT_PATIENCE)
    return ""


def _throughput_check(report, student, reference, min_ratio):
    if reference is None or reference.throughput is None:
        report.add("throughput vs the reference", False,
                   tr("the reference solution could not be measured in this session"))
        return
    rate = student.throughput
    if rate is None:
        report.add("throughput vs the reference", False, tr("no timed iteration (run too short?)"))
        return
    ratio = rate / reference.throughput
    report.add("throughput vs the reference", ratio >= min_ratio,
               tr("{rate:.1f} images/s = {ratio:.2f} x the reference's {reference:.1f} measured just before "
                  "(needed >= {needed:.2f})", rate=rate, ratio=ratio, reference=reference.throughput,
                  needed=min_ratio) + _contention(student, reference), value=ratio)


def _review(script):
    """The review of the script as handed in (checking.source_review), [] when it cannot be read."""
    try:
        with open(script, "rb") as f:
            return source_review.review(f.read(source_review.LARGEST_SCRIPT).decode(errors="replace"))
    except OSError:
        return []


def _trained_images(obs):
    """The images a trusted run (the reference's) trained on, all workers or ranks together."""
    record = obs.ranks.get(0, {}) if hasattr(obs, "ranks") else obs.record
    width = obs.np if hasattr(obs, "ranks") else 1
    return (record.get("iterations") or 0) * sum(b or 0 for b in record.get("batch_sizes") or []) * width


def _work(args, baseline, against):
    """(the images the grader's arguments ask the student's run to train on, the images its
    baseline trained on): the student's own baseline ran the same arguments; the reference's
    images are its trusted record's. (None, None) when the arguments do not say."""
    if baseline is None:
        return None, None
    record = baseline.ranks.get(0, {}) if hasattr(baseline, "ranks") else baseline.record
    n_train = argument(args, "--train-size") or (record.get("dataset") or {}).get("n_train")
    try:
        asked = int(argument(args, "--epoch", 4)) * int(n_train)
    except (TypeError, ValueError):
        return None, None
    return asked, (_trained_images(baseline) if against == "reference" else asked)


def _seen_by_the_grader(report, obs, baseline, flags, work=(None, None)):
    """Overrule "runs to the end" where the script's own lines (`flags`) or the CPU its processes
    used, seen from outside, contradict a run that says it trained: less than RUN_WORK_SHARE of
    the baseline's CPU per image, for the images `work` (_work) says."""
    if flags:
        report.overrule("runs to the end", tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the script {lines}: a training script has no use for that (the grader's records "
                             "of the run are not the script's to touch)", lines=source_review.said(flags)))
        return
    mine = (obs.outside or {}).get("cpu")
    theirs = (getattr(baseline, "outside", None) or {}).get("cpu")
    asked, done = work
    if mine is None or not theirs or not asked or not done:
        return
    expected = theirs * asked / done
    if mine < RUN_WORK_SHARE * expected:
        report.overrule("runs to the end", tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the run says it trained, but its processes used {mine:.1f} CPU-seconds, {share:.0%} of "
                             "the {theirs:.1f} that the same training takes (seen by the grader, outside the run)",
                             mine=mine, share=mine / expected, theirs=expected))


def _workers_seen(report, obs, gpus):
    """Task #1: the processes that computed, seen from outside the run, against one per device."""
    seen = (obs.outside or {}).get("processes")
    if not seen:
        return
    busy = launch.busy_processes(obs.outside)
    if report.passed("one worker process per device") and len(busy) < gpus:   # a failed check keeps the records' own words (they say why)
        report.overrule("one worker process per device",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the grader saw {n} process(es) computing ({cpu} CPU-seconds), {gpus} expected: one "
                             "process did the work", n=len(busy), gpus=gpus,
                             cpu=", ".join(f"{p['cpu']:.1f}" for p in busy) or "0"))


#: Calls in a script that set names a reading cannot follow: the precheck then leaves it to the run.
_DYNAMIC_NAMES = {"exec", "eval", "globals", "locals", "vars", "setattr", "__dict__"}


def _bound_names(tree):
    """Every name `tree` binds to something other than a bare None (the skeleton's `x = None`)."""
    bound = set()

    def targets(node):
        if isinstance(node, ast.Name):
            bound.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                targets(element)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                for target in node.targets:
                    targets(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets(node.target)
        elif isinstance(node, (ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension)):
            targets(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets(node.optional_vars)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)   # set elsewhere: not for this reading to follow
    return bound


def still_unset(script):
    """The names a script hands to runtime.require_done(...) that nothing in it ever sets but to
    None: the `# PUT YOUR CODE HERE` parts not written yet, found before any run. [] where the
    reading cannot tell (no such call, a syntax error, names set by exec/globals/setattr): the run
    then says what is wrong."""
    try:
        with open(script, "rb") as f:
            tree = ast.parse(f.read(source_review.LARGEST_SCRIPT))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    if used & _DYNAMIC_NAMES:
        return []
    bound = _bound_names(tree)
    unset = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and getattr(func, "attr", getattr(func, "id", None)) == "require_done":
            unset += [kw.value.id for kw in node.keywords
                      if isinstance(kw.value, ast.Name) and kw.value.id not in bound and kw.value.id not in unset]
    return unset


def _unfinished_report(task, script, unset, names, against):
    """The report of a script whose parts `unset` (still_unset) are not written yet: every check
    failed at once, no run started."""
    from handson_lib.runtime.training import not_complete   # the words the run itself would stop with
    why = not_complete("Task #1" if task == "multi-gpu" else "Task #2", unset)
    report = Report(task, str(script), observed={}, reference={}, output_tail="", against=against)
    report.add(names[0], False, tr("not implemented yet: {what}", what=why) + " "
               + tr("(found by reading the script: nothing was run)"))
    for name in names[1:]:
        report.add(name, False, tr("not checked: the script is not complete"))
    return report


def _ticking(say):
    """Progress lines every 10 s for a user who waits (nothing under the autograder: its report
    cells' output is the student's feedback)."""
    return None if grader_settings.current().autograding or say is None else say


def _self_speed_check(report, name, script, n, run_args, limit, stall, site, say, task, devices):
    """Self mode: the student's training step on `n` devices (or ranks) timed in turn with their
    own on 1, on the same clock (the grader's way: a load weighs on both alike), against the first
    of the site's speed-up bands; the rest of the machine's load said beside it."""
    bands = credit_bands("self", site)
    needed = bands[0][0]
    timed_args = [*run_args, "--seed", str(grader_seed())]
    if devices:
        say(tr("Timing your training step on {n} devices and on 1 device, in turn ...", n=n))
        args, ranks = ["--gpus", *map(str, range(n)), *timed_args], None
        base = Baseline(None, 1, ["--gpus", "0", *timed_args], tr("your launch on 1 device"))
        what, baseline_name = tr("{n} workers", n=n), tr("1-device run")
    else:
        say(tr("Timing your training step on {np} ranks and on 1 rank, in turn ...", np=n))
        args, ranks = timed_args, n
        base = Baseline(1, 1, timed_args, tr("your launch on 1 rank"))
        what, baseline_name = tr("{np} ranks", np=n), tr("1-rank run")

    def timing():
        return run_paired(script, script, args, ranks=ranks, devices=n, steps=TIMED_STEPS, timeout=limit, stall=stall,
                          part=f"{task}: your steps on {n} and on 1, in turn", own_baseline=base, say=_ticking(say))

    timed = timing()
    if timed.finished and _undecided(timed.block_ratios(), bands):
        say(tr("The spread of the ratio crosses a band's floor: timing once more ..."))
        again = timing()
        if again.finished:
            timed = again.pooled(timed)
    if not timed.finished:
        report.add(name, False, tr("could not be timed: {why}",
                                   why=tr("the timing did not finish: {error}", error=timed.error)))
        return
    speedup, blocks = timed.ratio, timed.block_ratios()
    line = tr("{what}: {speedup:.2f}x your own {baseline} (the median over pairs of training steps timed in turn, "
              "spread {low:.2f}-{high:.2f}; their median steps: {fast:.1f} vs {slow:.1f} images/s; needed >= "
              "{needed:.2f} on site {site})", what=what,
              speedup=speedup, baseline=baseline_name, fast=timed.rate("student"), slow=timed.rate("reference"),
              low=min(blocks), high=max(blocks), needed=needed, site=grading_site(site))
    others, cores = timed.progress.get("others_cores"), timed.progress.get("cores")
    got = timed.cores("student") / timed.cores("reference") if timed.cores("reference") else None
    judged = speedup
    if others is not None:
        line += tr("; meanwhile the rest of the machine kept {others:.1f} of its {cores} cores busy",
                   others=others, cores=cores)
        if got is not None and got < LOAD_LIMITED_SHARE * n and others >= BUSY_CORES:
            judged = min(float(n), speedup * n / max(1.0, got))   # never past n workers' worth
            line += tr(", and gave your steps on {n} only {got:.2f} times the CPU of your steps on 1: per core they "
                       "got, {judged:.2f}x (judged so: the load, not your script, held them back)", n=n, got=got,
                       judged=judged)
        if judged < needed and others >= BUSY_CORES:
            line += tr(": a busy machine slows the run on more workers most. Check again when it is quieter "
                       "(`uptime` shows the load); the grader times your steps in turn with the reference's, so "
                       "there a load weighs on both alike")
    report.add(name, judged >= needed, line + _contention(timed), value=judged)


def check_multi_gpu(script, gpus=2, args=None, reference=None, timeout=300, site=None,
                    min_throughput_ratio=None, min_accuracy=None, print_fn=None, against=None):
    """Grade Task #1. `reference` may be an Observation of the solution from this session;
    `against` chooses how throughput is judged (AGAINST; default: see `default_against`)."""
    against = _resolve_against(against, reference, "train_cifar_multi_gpu.py")
    limits = site_thresholds(site)
    min_ratio = limits["min_throughput_ratio"] if min_throughput_ratio is None else min_throughput_ratio
    min_acc = limits["min_accuracy"] if min_accuracy is None else min_accuracy
    args = list(MULTI_GPU_ARGS if args is None else args)
    run_args = ["--gpus", *map(str, range(gpus)), *args]
    say = print_fn or (lambda *_: None)
    if against == "reference":
        if reference is None:
            say(tr("Measuring the reference solution in this session ..."))
            reference = _measure_reference("train_cifar_multi_gpu.py", run_args, timeout)
        baseline = reference
        speed_name = "throughput vs the reference"
    else:
        # The speed-up is timed step by step after the run, beside the script's own 1-device steps.
        baseline, speed_name = None, f"throughput: {gpus} devices vs your 1-device run"
        unset = still_unset(script)
        if unset:
            return _unfinished_report("multi-gpu", script, unset, ["runs to the end", "uses MultiprocessParallelUpdater",
                                      "one worker process per device", "shards are disjoint",
                                      "shards cover the training set", "parameters equal on all workers",
                                      "accuracy beats chance", speed_name], against)
    say(tr("Running {script} on {n} devices under the grader's launcher ...", script=script, n=gpus))
    # This run decides correctness only (its speed is timed apart, step by step, below): against
    # the reference it shares the machine with other students' runs.
    limit, stall = student_limit(baseline, timeout), student_stall(baseline) or SELF_STALL
    flags = _review(script)
    obs = run_observed(script, [*run_args, "--seed", str(grader_seed())], limit, stall=stall,
                       part=f"your {gpus}-device run", say=_ticking(say))
    report = Report("multi-gpu", str(script), observed=obs.record,
                    reference=reference.record if against == "reference" else {},
                    output_tail=_tail(obs.output), against=against)
    if not obs.finished:
        report.add("runs to the end", False, _why_it_stopped(obs, timeout))
        for name in ("uses MultiprocessParallelUpdater", "one worker process per device",
                     "shards are disjoint", "shards cover the training set",
                     "parameters equal on all workers", "accuracy beats chance", speed_name):
            report.add(name, False, tr("not checked: the script did not finish"))
        return report
    record = obs.record
    report.add("runs to the end", True, tr("{iterations} iterations in {seconds:.1f} s",
                                           iterations=record.get("iterations"), seconds=obs.seconds))

    updater = record.get("updater")
    # The updater of the course's stand-in or Chainer's (a class of the script's named alike is neither).
    uses_mpu = updater in ("CPUParallelUpdater", "MultiprocessParallelUpdater") and \
        record.get("backend") in ("cpu", "chainer") and \
        record.get("updater_module") in ("handson_lib.runtime.multigpu", "chainer.training.updaters.multiprocess_parallel_updater")
    report.add("uses MultiprocessParallelUpdater", uses_mpu,
               tr("backend: {backend}", backend=record.get("backend")) if uses_mpu else
               tr("the trainer ran {updater}: one process did all the work. Build "
                  "chainer.training.updaters.MultiprocessParallelUpdater(iterators, optimizer, devices)",
                  updater=updater))

    main_pid = record.get("pid")
    if record.get("backend") == "chainer":
        n = record.get("n_iterators")
        report.add("one worker process per device", n == gpus,
                   tr("{n} iterator(s) for {gpus} GPUs (Chainer's updater starts one process each)",
                      n=n, gpus=gpus))
    else:
        pids = {int(w["pid"]) for i, w in obs.workers.items() if i > 0} - {main_pid}
        n = len(pids) + (1 if 0 in obs.workers else 0)
        report.add("one worker process per device", n == gpus,
                   tr("{n} process(es) computed gradients, {gpus} expected", n=n, gpus=gpus))

    _shard_checks(report, record)

    if record.get("backend") == "chainer":
        report.add("parameters equal on all workers", True,
                   tr("Chainer's updater broadcasts the main device's parameters after every update"))
    elif len(obs.workers) >= 2:
        params = [w["params"] for _, w in sorted(obs.workers.items())]
        worst = max(float(numpy.max(numpy.abs(p - params[0]))) for p in params[1:])
        report.add("parameters equal on all workers", worst == 0.0,
                   tr("largest difference between workers after training: {worst:.3g}", worst=worst))
    else:
        report.add("parameters equal on all workers", False, tr("fewer than two workers to compare"))

    _accuracy_check(report, record, min_acc, obs.evidence)
    _seen_by_the_grader(report, obs, baseline, flags, _work(args, baseline, against))
    _workers_seen(report, obs, gpus)
    if against == "reference":
        if report.failed:
            report.add(speed_name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
        else:
            _paired_speed_checks(report, script, _reference_script("train_cifar_multi_gpu.py"), gpus, False, limit,
                                 stall, credit_bands("reference", site), min_ratio, None, "multi-gpu", say,
                                 devices=True, run_args=args)
    elif report.failed:
        report.add(speed_name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
    else:
        _self_speed_check(report, speed_name, script, gpus, args, limit, stall, site, say, "multi-gpu", devices=True)
    return report


def _why_ranks_stopped(obs, timeout):
    if obs.timed_out:
        waiting = [r for r in range(obs.np) if not obs.ranks.get(r, {}).get("finished")]
        lines = [tr("deadlock: the {np}-rank run {how}; rank(s) {waiting} never finished (one rank waiting "
                    "for another forever?)", np=obs.np, how=_stopped_how(obs, timeout), waiting=waiting)]
        for r in range(obs.np):
            lines.append(tr("    rank {rank} last output: {output}", rank=r,
                            output=obs.rank_output(r, 2).replace("\n", " | ") or tr("(none)")))
        return "\n".join(lines)
    errors = {r: rec.get("error") for r, rec in obs.ranks.items() if rec.get("error")}
    for rank, error in sorted(errors.items()):
        if error.startswith("NotImplementedError"):
            return _not_implemented(error)
    if errors:
        crashes = "; ".join(tr("rank {rank} crashed with {error}", rank=r, error=e)
                                for r, e in sorted(errors.items()))
        return tr("{crashes} (the other ranks were aborted)", crashes=crashes)
    missing = [r for r in range(obs.np) if r not in obs.ranks]
    if missing:
        return tr("rank(s) {missing} died without a Python error (exit code {code})",
                  missing=missing, code=obs.returncode)
    return tr("exit code {code}", code=obs.returncode)


def _evaluator_check(report, obs):
    last = {r: rec["evaluations"][-1] for r, rec in obs.ranks.items() if rec.get("evaluations")}
    if len(last) < obs.np:
        report.add("evaluator aggregated over ranks", False, tr("not every rank ran an Evaluator"))
        return
    key = next((k for k in last[0]["reported"] if k.endswith("accuracy")), None) or \
        next(iter(last[0]["reported"]), None)
    if key is None:
        report.add("evaluator aggregated over ranks", False, tr("the Evaluator reported nothing"))
        return
    reported = [last[r]["reported"].get(key) for r in range(obs.np)]
    local = [last[r]["local"].get(key) for r in range(obs.np)]
    mean = sum(local) / len(local)
    same = max(reported) - min(reported) <= 1e-6
    is_mean = all(abs(v - mean) <= 1e-6 for v in reported)
    alone = not any(last[r].get("wrapped") for r in range(obs.np)) and \
        max(local) - min(local) <= 1e-6 and reported == local
    if alone:
        # Equal only because every rank evaluated the same test set on its own.
        report.add("evaluator aggregated over ranks", False,
                   tr("every rank evaluated the whole test set alone ({key} = {value:.4f} on each): give each "
                      "rank its part of the test set and wrap the Evaluator with "
                      "chainermn.create_multi_node_evaluator", key=key, value=reported[0]))
    elif same and is_mean:
        report.add("evaluator aggregated over ranks", True,
                   tr("{key} = {value:.4f} on every rank = mean of the ranks' own {local}",
                      key=key, value=reported[0], local=local))
    else:
        report.add("evaluator aggregated over ranks", False,
                   tr("each rank reports its own {key} {reported} instead of the mean over ranks ({mean:.4f}): "
                      "wrap the Evaluator with chainermn.create_multi_node_evaluator",
                      key=key, reported=reported, mean=mean))


def _parameters_check(report, obs):
    np = obs.np
    alone = [r for r in range(np) if obs.ranks.get(r, {}).get("optimizer_communicator") is False]
    if len(obs.params) == np and len(alone) == np:
        # Identical parameters prove nothing when each rank ran the same single-process training.
        report.add("parameters identical on every rank", False,
                   tr("no rank averages its gradients with the others (the optimizer is a plain {optimizer}): "
                      "each rank trains alone; wrap the optimizer with "
                      "chainermn.create_multi_node_optimizer(opt, comm)", optimizer=obs.ranks[0].get("optimizer")))
    elif len(obs.params) == np:
        worst = max(float(numpy.max(numpy.abs(obs.params[r] - obs.params[0]))) for r in range(1, np))
        report.add("parameters identical on every rank", worst == 0.0,
                   tr("identical after training") if worst == 0.0 else
                   tr("the ranks' parameters differ by up to {worst:.3g} after training: each rank updated "
                      "alone; wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)",
                      worst=worst))
    else:
        report.add("parameters identical on every rank", False, tr("parameters of some ranks are missing"))


def _averaging_seen(report, obs, reference, work=(None, None)):
    """Task #2: the bytes the ranks sent each other over the run, seen from outside (the grading
    sandbox's own loopback), against what averaging the gradients moves: about 2L(p-1) bytes an
    iteration for gradients of L bytes, the reference's L and iterations (the same training).
    Nothing to see outside the sandbox, or without the reference: the records decide there."""
    sent = (obs.outside or {}).get("loopback_bytes")
    params = getattr(reference, "params", None) or {}
    iterations = (getattr(reference, "ranks", None) or {}).get(0, {}).get("iterations")
    asked, done = work
    if sent is None or obs.np < 2 or 0 not in params or not iterations or not asked or not done:
        return
    iterations = round(iterations * asked / done)   # the reference's, for as many images as asked
    expected = iterations * 2 * (obs.np - 1) * 4 * params[0].size
    if report.passed("parameters identical on every rank") and sent < AVERAGING_SHARE * expected:   # a failed check keeps the records' own words
        report.overrule("parameters identical on every rank",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the ranks sent each other {sent:.1f} MB over the run; averaging the gradients moves about "
                             "{expected:.0f} MB ({iterations} iterations of 2L(p-1), L = {megabytes:.2f} MB): each rank "
                             "trained alone. Wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)",
                             sent=sent / 1e6, expected=expected / 1e6, iterations=iterations,
                             megabytes=4 * params[0].size / 1e6))


def _reporting_check(report, obs):
    reporting = {r: [e for e in obs.ranks[r].get("extensions", [])
                     if e in ("LogReport", "PrintReport", "ProgressBar") or e.startswith("PlotReport")]
                 for r in range(obs.np)}
    extra = {r: e for r, e in reporting.items() if r > 0 and e}
    if not extra and reporting[0]:
        message = tr("LogReport/PrintReport on rank 0 only")
    elif extra:
        message = tr("ranks {ranks} also run {extensions}: add them under `if comm.rank == 0:`",
                     ranks=sorted(extra), extensions=sorted(set(sum(extra.values(), []))))
    else:
        message = tr("rank 0 has no LogReport/PrintReport")
    report.add("reports only on rank 0", not extra and bool(reporting[0]), message)


#: What the trainer's reports print, as the launcher tags each rank's lines ("[1,r]<stdout>: ...",
#: `mpiexec --output tag`): PrintReport's header and ProgressBar's bars.
_TAGGED_REPORT = re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>: ?(?:\x1b\[J)?(?:epoch\s+main/|\s*(?:total|this epoch) \[)",
                            re.M)


def _reports_seen(report, obs):
    """Overrule "reports only on rank 0" where the launcher's tagged output, which the ranks'
    records do not make, shows another rank printing the trainer's reports."""
    seen = sorted({int(rank) for rank in _TAGGED_REPORT.findall(obs.output or "")} - {0})
    if seen and report.passed("reports only on rank 0"):
        report.overrule("reports only on rank 0", tr("tampering suspected, for the instructor to review: ")  # TAMPERING
                        + tr("the run's records say rank 0 alone reports, but rank(s) {ranks} printed the trainer's "
                             "reports (seen in the launcher's output, where each line carries its rank)", ranks=seen))


def _multi_node_speed_names(against, np, scaling):
    if against == "reference":
        return ["throughput vs the reference"] + ([f"scaling 1 -> {np} ranks vs the reference"] if scaling else [])
    return [f"scaling: {np} ranks vs your 1-rank run"] if scaling else []


def check_multi_node(script, np=2, args=None, reference=None, timeout=300, site=None, scaling=True,
                     min_throughput_ratio=None, min_accuracy=None, min_scaling_ratio=None, print_fn=None,
                     reference_name="train_cifar_multi_node.py", task="multi-node", against=None, timed=True):
    """Grade Task #2 on `np` local ranks (and 1 rank for the scaling check).

    `reference` may be a dict {1: MPIObservation, np: MPIObservation} of the solution measured
    earlier in this session. `against="self"` judges speed by the script's own 1-rank run only
    (the scaling check; nothing when `scaling` is off). `timed`: the student's runs hold the
    machine's timing slot alone (their speed is scored)."""
    against = _resolve_against(against, reference, reference_name)
    limits = site_thresholds(site)
    min_ratio = limits["min_throughput_ratio"] if min_throughput_ratio is None else min_throughput_ratio
    min_acc = limits["min_accuracy"] if min_accuracy is None else min_accuracy
    min_scaling = limits["min_scaling_ratio"] if min_scaling_ratio is None else min_scaling_ratio
    args = list(MULTI_NODE_ARGS if args is None else args)
    say = print_fn or (lambda *_: None)
    reference = dict(reference or {})
    if against == "reference":
        # Its run on `np` ranks sets the watchdog; speed and scaling are timed step by step beside it.
        if np not in reference:
            say(tr("Measuring the reference solution on {np} rank(s) in this session ...", np=np))
            reference[np] = _measure_reference(reference_name, args, timeout, np=np)
        limit = student_limit(reference[np], timeout)
    else:
        # The scaling is timed step by step after the run, beside the script's own 1-rank steps.
        unset = still_unset(script)
        if unset:
            return _unfinished_report(task, script, unset, [
                "runs to the end", "shards are disjoint", "shards cover the training set",
                "parameters identical on every rank", "evaluator aggregated over ranks", "reports only on rank 0",
                "accuracy beats chance", *_multi_node_speed_names(against, np, scaling)], against)
        limit = timeout
    stall = student_stall(reference.get(np)) if against == "reference" else SELF_STALL
    say(tr("Running {script} on {np} ranks under the grader's launcher ...", script=script, np=np))
    # Against the reference, this run only decides correctness (its speed is timed apart, below):
    # it shares the machine with other students' runs.
    paired = against == "reference" and timed
    flags = _review(script)
    obs = run_observed_mpi(script, np, [*args, "--seed", str(grader_seed())], limit,
                           timed=timed and not paired and against == "reference", stall=stall,
                           part=f"{task}: your {np}-rank run", say=_ticking(say))
    report = Report(task, str(script), observed=obs.ranks.get(0, {}),
                    reference=reference[np].ranks.get(0, {}) if against == "reference" else {},
                    output_tail=_tail(obs.output), against=against)
    names = ["runs to the end", "shards are disjoint", "shards cover the training set",
             "parameters identical on every rank", "evaluator aggregated over ranks",
             "reports only on rank 0", "accuracy beats chance", *_multi_node_speed_names(against, np, scaling)]
    if not obs.finished:
        report.add("runs to the end", False, _why_ranks_stopped(obs, timeout))
        for name in names[1:]:
            report.add(name, False, tr("not checked: the run did not finish"))
        return report
    report.add("runs to the end", True, tr("{np} ranks, {iterations} iterations in {seconds:.1f} s",
                                           np=np, iterations=obs.ranks[0].get("iterations"), seconds=obs.seconds))

    shards = {"shards": [obs.ranks[r]["shards"][0] for r in range(np)],
              "train_fingerprints": obs.ranks[0].get("train_fingerprints")}
    _shard_checks(report, shards, what="rank")
    _parameters_check(report, obs)
    _evaluator_check(report, obs)
    _reporting_check(report, obs)
    _reports_seen(report, obs)
    _accuracy_check(report, obs.ranks[0], min_acc, obs.evidence)
    baseline = reference.get(np) if against == "reference" else None
    work = _work(args, baseline, against)
    _seen_by_the_grader(report, obs, baseline, flags, work)
    _averaging_seen(report, obs, reference.get(np) if against == "reference" else None, work)
    if against == "self":
        if scaling and report.failed:
            report.add(names[-1], False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
        elif scaling:
            _self_speed_check(report, names[-1], script, np, args, limit, stall, site, say, task, devices=False)
        return report
    if not paired:  # a run whose speed is shown, never scored (the MNIST conversion)
        # ... except under the autograder: there it shares the machine with other students' runs
        # while the reference ran alone, and a ratio of the two would only measure the neighbours.
        if not grader_settings.current().autograding:
            _throughput_check(report, obs, reference[np], min_ratio)
        return report
    if report.failed:
        for name in _multi_node_speed_names(against, np, scaling):
            report.add(name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
        return report
    _paired_speed_checks(report, script, _reference_script(reference_name), np, scaling, limit, stall,
                         credit_bands("reference", site), min_ratio, min_scaling, task, say, run_args=args)
    return report


def _time_in_turn(reference_script, script, np, limit, stall, task, say, earlier=None, devices=False,
                  run_args=None):
    """A paired timing (handson_lib.checking.paired) on `np` ranks, or in one process on `np`
    devices (Task #1), pooled with an `earlier` one. Both launches get the correctness run's
    arguments (`run_args`) and a seed of the grader's, as that run did: a script cannot tell the
    timed steps from the graded training by its arguments."""
    timed_args = [*(TIMING_ARGS if run_args is None else run_args), "--seed", str(grader_seed())]
    if devices:
        say(tr("Timing your training step against the reference's, in turn, on {n} devices ...", n=np))
        args, ranks, unit = ["--gpus", *map(str, range(np)), *timed_args], None, "devices"
    else:
        say(tr("Timing your training step against the reference's, in turn, on {np} rank(s) ...", np=np))
        args, ranks, unit = timed_args, np, "rank(s)"
    obs = run_paired(reference_script, script, args, ranks=ranks, devices=np, steps=TIMED_STEPS, timeout=limit,
                     stall=stall, part=f"{task}: timing on {np} {unit}, the reference's steps and yours in turn")
    if earlier is not None and obs.finished:
        obs.pooled(earlier)
    return obs


def _undecided(values, bands):
    """True when the spread of `values` crosses a band's floor (two bands would score it)."""
    return band_share(min(values), bands) != band_share(max(values), bands)


#: A paired timing in which the reference's steps ran this many times slower than its median over
#: the session's other timings (something beside it slowed it: a student's ratio would gain) is
#: timed again, twice at most; slowed every time, it is flagged for the instructor, never credited.
#: Generous: a busy neighbour's load alone swung the reference's rate 3-fold on a 2-core machine.
REFERENCE_SLOWDOWN = 2.5
#: The session's earlier timings needed before a median is believed.
RATES_BEFORE_A_MEDIAN = 3
#: The session's reference rates of the paired timings, in the grader's reference cache.
REFERENCE_RATES = "paired-reference-rates.jsonl"


def _session_rates(key):
    """The reference's rates in this session's earlier paired timings of `key` ([] outside a
    grading session: the student's self-check, a test)."""
    cache = grader_settings.current().reference_cache
    if not cache:
        return []
    try:
        lines = (Path(cache) / REFERENCE_RATES).read_text().splitlines()
    except OSError:
        return []
    rates = []
    for line in lines:
        try:
            kept = json.loads(line)
        except ValueError:
            continue
        if kept.get("key") == key and isinstance(kept.get("rate"), (int, float)):
            rates.append(float(kept["rate"]))
    return rates


def _keep_rate(key, rate):
    cache = grader_settings.current().reference_cache
    if cache:
        import fcntl
        with open(Path(cache) / REFERENCE_RATES, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(json.dumps({"key": key, "rate": rate}) + "\n")


def _slowed(key, timing):
    """How many times slower than its session median the reference ran in `timing` (None when it
    did not, or there is no median yet)."""
    rates = sorted(_session_rates(key))
    if len(rates) < RATES_BEFORE_A_MEDIAN or not timing.finished:
        return None
    median = rates[len(rates) // 2]
    slowdown = median / timing.rate("reference")
    return slowdown if slowdown > REFERENCE_SLOWDOWN else None


def _paired_speed_checks(report, script, reference_script, np, scaling, limit, stall, bands, min_ratio,
                         min_scaling, task, say, devices=False, run_args=None):
    """Reference mode: the student's training step timed in turn with the reference's, on `np`
    ranks (the throughput check) and on 1 (the scaling check: the ratio on `np` ranks over the
    ratio on 1), or on `np` devices of one process (`devices`: Task #1, no scaling check). A
    spread that crosses a band's floor is measured once more, pooled, and said."""
    counts = [np, 1] if scaling else [np]
    timed = {n: _time_in_turn(reference_script, script, n, limit, stall, task, say, devices=devices, run_args=run_args)
             for n in counts}

    def spreads():
        blocks = {n: timed[n].block_ratios() for n in counts}
        if scaling:
            return blocks[np], [a / b for a, b in zip(blocks[np], blocks[1])]
        return blocks[np], None

    if all(t.finished for t in timed.values()):
        ratio_blocks, scaling_blocks = spreads()
        if _undecided(ratio_blocks, bands) or (scaling and _undecided(scaling_blocks, bands)):
            say(tr("The spread of the ratio crosses a band's floor: timing once more ..."))
            timed = {n: _time_in_turn(reference_script, script, n, limit, stall, task, say, timed[n], devices,
                                      run_args) for n in counts}
    keys = {n: f"{task}:{n}:{'devices' if devices else 'ranks'}" for n in counts}
    for _ in range(2):
        slowed = [n for n in counts if _slowed(keys[n], timed[n])]
        if not slowed:
            break
        say(tr("The reference ran slower than in this session's other timings: timing once more ..."))
        for n in slowed:
            timed[n] = _time_in_turn(reference_script, script, n, limit, stall, task, say, devices=devices,
                                     run_args=run_args)
    names = _multi_node_speed_names("reference", np, scaling)
    still = {n: _slowed(keys[n], timed[n]) for n in counts}
    if any(still.values()):
        for name in names:
            report.add(name, False, tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                       + tr("the reference's steps ran {slowdown:.1f} times slower than in this session's other "
                            "timings, three times: something beside them slowed them down, and a ratio to them is "
                            "not credited", slowdown=max(v for v in still.values() if v)))
        return
    for n in counts:
        if timed[n].finished:
            _keep_rate(keys[n], timed[n].rate("reference"))
    broken = [n for n in counts if not timed[n].finished]
    if broken:
        # The timing's own words and the student's launch's output: never the reference's under
        # the autograder (handson_lib.checking.paired).
        why = tr("the timing did not finish: {error}", error=timed[broken[0]].error)
        for name in names:
            report.add(name, False, tr("could not be timed: {why}", why=why))
        return
    suspected = [s for n in counts for s in timed[n].suspicions]
    if suspected:
        for name in names:
            report.add(name, False, tr("tampering suspected, for the instructor to review: ")  # TAMPERING
                       + "; ".join(dict.fromkeys(suspected)))
        return
    ratio_blocks, scaling_blocks = spreads()
    t = timed[np]
    undecided = tr(" (the spread crosses a band's floor even after a second timing: scored by the median)")
    ratio = t.ratio
    report.add(names[0], ratio >= min_ratio,
               tr("{rate:.1f} images/s = {ratio:.2f} x the reference's {reference:.1f}, training steps timed in "
                  "turn (spread {low:.2f}-{high:.2f} over {blocks} blocks of steps; needed >= {needed:.2f})",
                  rate=t.rate("student"), ratio=ratio, reference=t.rate("reference"), low=min(ratio_blocks),
                  high=max(ratio_blocks), blocks=len(ratio_blocks), needed=min_ratio)
               + (undecided if _undecided(ratio_blocks, bands) else "") + _contention(*timed.values()), value=ratio)
    if scaling:
        share = ratio / timed[1].ratio
        mine = t.rate("student") / timed[1].rate("student")
        theirs = t.rate("reference") / timed[1].rate("reference")
        report.add(names[1], share >= min_scaling,
                   tr("{mine:.2f}x from 1 to {np} ranks, the reference {theirs:.2f}x beside it; your step is "
                      "{ratio:.2f}x the reference's on {np} ranks and {ratio_one:.2f}x on 1: {share:.2f} of its "
                      "scaling (spread {low:.2f}-{high:.2f}; needed >= {needed:.2f})", mine=mine, np=np,
                      theirs=theirs, ratio=ratio, ratio_one=timed[1].ratio, share=share,
                      low=min(scaling_blocks), high=max(scaling_blocks), needed=min_scaling)
                   + (undecided if _undecided(scaling_blocks, bands) else "") + _over_tcp(), value=share)


def _over_tcp():
    """Why 2 ranks may step slower than 1 in the grading sandbox (said beside the scaling)."""
    from handson_lib.checking.runs import transport
    if not transport():
        return ""
    return tr(" (in the grading sandbox the ranks talk over TCP, as between nodes: on one machine 2 ranks may step "
              "slower than 1; the share of the reference's scaling beside yours is what counts)")


def check_mnist_multi_node(script, np=2, **kwargs):
    """Grade the "ChainerMN in seconds" conversion (digits MLP: too small to scale, so no scaling check)."""
    kwargs.setdefault("args", MNIST_ARGS)
    kwargs.setdefault("scaling", False)
    kwargs.setdefault("timed", False)  # its speed is shown, never scored
    return check_multi_node(script, np=np, reference_name="train_mnist_multi_node.py",
                            task="mnist-multi-node", **kwargs)


#: Job scripts graded with each task: (file, the site table's request kind).
JOBSCRIPTS = {"multi-gpu": ("run_multi_gpu_training.sh", "multi_gpu"),
              "multi-node": ("run_multi_node_training.sh", "multi_node")}


def check_jobscript(script, task, site=None):
    """Grade a task's job script with `handson jobscript lint` at the student's site, and its
    request against the task's layout there. The site is the one lint takes: `site` (--site), else
    the script's `# handson-site: NAME` line, else Reedbush-H (DEFAULT_SITE); only the sites with
    job-script exercises (EXERCISE_SITES) are graded. HANDSON_SITE (the grading machine's
    thresholds) never decides it: the machine that grades is not the site the job is for.

    The group line is the one exception: the course's placeholder (gt00) is a warning, as with
    `--template`, because a grader cannot know each student's group; a student replaces it before
    `qsub`, where `handson jobscript lint` without `--template` refuses it."""
    name, kind = JOBSCRIPTS[task]
    report = Report(f"jobscript-{task}", str(script), against="self")
    path = Path(script)
    if not path.exists():
        report.add("job script lint", False, tr("{name} was not handed in", name=name))
        report.add("resources of the task", False, tr("not checked: no job script"))
        return report
    text = jobscript.read_script(path)
    try:
        site = get_site(jobscript.site_for_script(path, text, site))
    except ValueError as error:     # `# handson-site: NAME` of no site in the table
        site = None
        why = str(error)
    else:
        why = None if site.key in EXERCISE_SITES else tr(
            "the course grades job scripts for {sites}; {site} is not one of them: name your site in the "
            "`# handson-site:` line", sites=", ".join(get_site(k).key for k in EXERCISE_SITES), site=site.title)
    if why:
        report.add("job script lint", False, why)
        report.add("resources of the task", False, tr("not checked: no site to check against"))
        return report
    findings = jobscript.lint(text, site, template=True)
    bad = jobscript.errors(findings)
    shown = "\n".join("    " + f.format(path.name) for f in findings)
    verdict = tr("{n} error(s)", n=len(bad)) if bad else tr("no error")
    report.add("job script lint", not bad,
               f"`handson jobscript lint --site {site.key}`: {verdict}" + (":\n" + shown if shown else ""))
    if jobscript.too_large(text):
        report.add("resources of the task", False, tr("not checked: the job script is too large"))
        return report
    req = jobscript.parse_request(text)
    nodes = site.scripts.requests[kind][0]
    procs = ranks_per_node(site, kind)
    if not req.select:
        report.add("resources of the task", False, tr("no `#PBS -l select=...` line"))
    else:
        ok = req.nodes == nodes and req.mpiprocs == procs
        asked = tr("asks for {nodes} node(s) x {procs} MPI process(es)", nodes=req.nodes, procs=req.mpiprocs)
        report.add("resources of the task", ok, asked if ok else tr(
            "{asked}; {task} on {site} runs on {nodes} node(s) x {procs} MPI process(es) per node",
            asked=asked, task=task, site=site.title, nodes=nodes, procs=procs))
    return report


def band_share(ratio, bands):
    """Share of the points for a ratio to the reference: the first band whose floor it reaches."""
    for floor, share in bands:
        if ratio is not None and ratio >= floor:
            return share
    return 0.0


def credit_bands(against, site=None):
    """(floor, share of the points) bands of the site: of the ratio to the reference, or of the
    student's own speed-up in self mode."""
    return site_thresholds(site)["throughput_bands" if against == "reference" else "speedup_bands"]


def throughput_credit(report, points, site=None, print_fn=print):
    """Points for the speed checks of a report, in the site's bands (partial credit) of the
    report's mode: ratios to the reference, or the student's own speed-ups in self mode.

    The grade cell's last value is this number: nbgrader gives it as the cell's score. With no
    credit at all it raises, so that the feedback shows why."""
    bands = credit_bands(report.against, site)
    speed = report.speed_checks
    if not speed:
        raise AssertionError(tr("throughput not measured: the run did not finish"))
    wrong = [c for c in report.checks if c not in speed and not c.passed]
    if wrong:
        raise AssertionError(tr("throughput is scored only for a correct run; first fix:") + "\n"
                             + "\n".join(c.line() for c in wrong))
    shares = [band_share(c.value, bands) for c in speed]
    credit = round(points * sum(shares) / len(shares), 2)
    print_fn(RATIO_TAG + " " + " ".join(f"{c.name.split()[0]}={c.value if c.value is not None else 'nan'}"
                                        for c in speed))
    measure = tr("ratio to the reference") if report.against == "reference" else tr("speed-up over your own run")
    bands_text = f"{measure} " + ", ".join(f">= {floor:.2f}: {share:.0%}" for floor, share in bands)
    for check, share in zip(speed, shares):
        print_fn(tr("{line}  -> {share:.0%} of the points (bands {bands})", line=check.line(), share=share,
                    bands=bands_text))
    if credit == 0:
        raise AssertionError(tr("no throughput credit:") + "\n" + "\n".join(c.line() for c in speed))
    return credit


def _check_of(task):
    if task.jobscript:   # --site names the site whose lint applies (default: the script's `# handson-site:` line, else Reedbush-H)
        return lambda script, site=None, **_: check_jobscript(script, task.runs, site)
    return globals()[task.check]


#: `handson check TASK`: each task of the registry (handson_lib.tasks) and its check.
TASKS = {task.name: _check_of(task) for task in tasks.TASKS}


def add_arguments(parser):
    parser.add_argument("task", help=f"{', '.join(TASKS)} (a jobscript-* task: the job script's points, lint at "
                        "the script's site)")
    parser.add_argument("file", help="your script, e.g. exercises/train_cifar_multi_gpu.py")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before the watchdog stops a run")
    parser.add_argument("--site", default=None, help="the site whose thresholds and bands apply: "
                        f"{', '.join(SITES)} (default: HANDSON_SITE, else local); for jobscript-*, the "
                        "site whose rules apply (default: the script's '# handson-site:' line, else reedbush)")
    parser.add_argument("--min-throughput-ratio", type=float, default=None,
                        help="throughput needed, as a fraction of the reference solution's (reference mode)")
    parser.add_argument("--np", type=int, default=2, help="ranks for multi-node (also run on 1 for scaling)")
    parser.add_argument("--against", choices=AGAINST, default=None,
                        help="judge throughput against the reference solution's steps timed in turn with yours, or against "
                             "your own 1-device / 1-rank run (default: reference where the solutions are "
                             "installed, self otherwise)")
    parser.add_argument("--json", action="store_true", help="machine-readable report")


def main(args):
    if args.task not in TASKS:
        print(tr("unknown task {task!r}; choose one of {choices}", task=args.task, choices=", ".join(TASKS)),
              file=sys.stderr)
        return 2
    if not Path(args.file).exists():
        print(tr("{file}: no such file", file=args.file), file=sys.stderr)
        return 2
    kwargs = dict(timeout=args.timeout, site=args.site, print_fn=print, against=args.against)
    if args.task in ("multi-node", "mnist-multi-node"):
        kwargs["np"] = args.np
    if args.min_throughput_ratio is not None:
        kwargs["min_throughput_ratio"] = args.min_throughput_ratio
    try:
        report = TASKS[args.task](args.file, **kwargs)
    except ValueError as error:  # a bad --site or --against
        print(f"handson check: {error}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else report.text())
    return 0 if report.ok else 1
