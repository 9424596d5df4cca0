"""How long grading a class will take: the costs one `handson autograde` session measured (per
student, by kind of part: the timed runs that hold the timing slot alone, the waits for it, the
untimed runs, the rest), kept as JSON, and projected onto a class of any size graded on several
nodes like the measured machine (`handson autograde --plan STUDENTS --nodes N`, the README's table).
"""

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

TIMED = "timed runs (hold the timing slot alone)"
WAITING = "waiting for the timing slot"
UNTIMED = "untimed runs"
REST = "the rest: other cells, nbgrader, kernel start-up"
#: The groups a student's grading time falls into, in the order they are shown.
GROUPS = (TIMED, WAITING, UNTIMED, REST)

#: Seconds a node's batch job takes to start grading (scheduler, Python, the sandbox): a
#: guess, not measured here; the queue's wait for a node is not counted.
JOB_START_SECONDS = 60.0

#: What a costs file must hold, and the type of each value.
COST_KEYS = {"host": str, "students": int, "wall_seconds": (int, float), "jobs": int, "cores": int,
             "reference_seconds": (int, float), "per_student": dict, "by_part": dict,
             "timed_seconds_per_student": (int, float), "wall_seconds_per_student": (int, float),
             "student_seconds": (int, float)}


def is_timed(part):
    """Whether a logged part held the timing slot alone. The log says so where it has "timed";
    else the name tells: the reference's runs ("reference ...", measured alone so that every
    student is compared with the same) and the paired timings ("... in turn") are timed; the
    students' own runs and the notebooks' runs share the machine."""
    if isinstance(part.get("timed"), bool):
        return part["timed"]
    name = part["part"]
    return name.startswith("reference ") or name.endswith("in turn")


def _student_groups(result):
    """One student's seconds by group: the rest is what its parts and waits leave of its wall time."""
    groups = dict.fromkeys(GROUPS, 0.0)
    for part in result["parts"]:
        groups[TIMED if is_timed(part) else UNTIMED] += part["seconds"]
        groups[WAITING] += part.get("waited") or 0.0
    groups[REST] = result["seconds"] - groups[TIMED] - groups[UNTIMED] - groups[WAITING]
    return groups


def session_costs(results, wall_seconds, jobs, cores, reference_seconds, host):
    """What a grading session cost, per student (JSON-able): `results` are the students' results
    ({"student", "seconds", "parts"}), `wall_seconds` the whole session's, `reference_seconds` of
    it measuring the references before the students, `jobs` students graded at once on `cores`."""
    results = list(results)
    if not results:
        raise ValueError("no student was graded: nothing to measure the costs by")
    count = len(results)
    totals = dict.fromkeys(GROUPS, 0.0)
    by_part = {}
    for result in results:
        for group, seconds in _student_groups(result).items():
            totals[group] += seconds
        for part in result["parts"]:
            entry = by_part.setdefault(part["part"], {"group": TIMED if is_timed(part) else UNTIMED, "seconds": 0.0})
            entry["seconds"] += part["seconds"]
    per_student = {group: round(seconds / count, 2) for group, seconds in totals.items()}
    return {
        "host": host, "students": count, "wall_seconds": round(wall_seconds, 2), "jobs": jobs, "cores": cores,
        "reference_seconds": round(reference_seconds, 2),
        "per_student": per_student,
        "by_part": {name: {"group": e["group"], "seconds": round(e["seconds"] / count, 2)}
                    for name, e in by_part.items()},
        "timed_seconds_per_student": per_student[TIMED],
        # The session's throughput: the students overlapped `jobs` at once, the references did not.
        "wall_seconds_per_student": round((wall_seconds - reference_seconds) / count, 2),
        # One student's grading from start to end: a node takes at least that long.
        "student_seconds": round(sum(r["seconds"] for r in results) / count, 2),
    }


def write_costs(path, costs):
    """Keep `costs` (session_costs) as JSON at `path`."""
    Path(path).write_text(json.dumps(costs, indent=2, ensure_ascii=False) + "\n")
    return path


def read_costs(path):
    """The costs kept at `path`; a ValueError naming the file when it is not there, not JSON, or
    lacks what a projection needs."""
    try:
        costs = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the grading costs ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: the grading costs are not JSON ({exc})") from exc
    if not isinstance(costs, dict):
        raise ValueError(f"{path}: the grading costs are not a JSON object")
    missing = [key for key in COST_KEYS if key not in costs]
    if missing:
        raise ValueError(f"{path}: the grading costs lack {', '.join(missing)} (measure them again)")
    wrong = [key for key, kind in COST_KEYS.items()
             if not isinstance(costs[key], kind) or isinstance(costs[key], bool)]
    if wrong:
        raise ValueError(f"{path}: the grading costs hold values of the wrong type: {', '.join(wrong)}")
    if costs["students"] < 1:
        raise ValueError(f"{path}: the grading costs were measured on no student")
    return costs


@dataclass(frozen=True)
class Projection:
    """The projected wall time of grading `students` on `nodes` nodes: `per_node` students on the
    busiest node, which takes `seconds`; `bound` says which floor set it; `one_node_seconds` is
    the same class on one node."""
    students: int
    nodes: int
    per_node: int
    seconds: float
    bound: str
    one_node_seconds: float

    def as_dict(self):
        return asdict(self)


def _node_seconds(costs, per_node, job_start_seconds):
    """(seconds, bound) of one node grading `per_node` students."""
    floors = {
        "the measured wall time per student": per_node * costs["wall_seconds_per_student"],
        # One timing slot per node: its timed runs follow one another, whatever `jobs` is.
        "the timed runs, one after another": per_node * costs["timed_seconds_per_student"],
        # A node with few students is not done before one student's grading is.
        "one student's grading": costs["student_seconds"] if per_node else 0.0,
    }
    bound = max(floors, key=floors.get)
    return costs["reference_seconds"] + job_start_seconds + floors[bound], bound


def project(costs, students, nodes, job_start_seconds=JOB_START_SECONDS):
    """The wall time of grading `students` on `nodes` nodes, each like the measured machine (its
    cores, `jobs` at once; a different machine is not modelled).

    The students are split evenly: the busiest node grades ceil(students / nodes). A node's time
    is its job's start-up (`job_start_seconds`), the references measured once before its students
    (`reference_seconds`), and its students times the larger of the measured wall time per student
    and the timed seconds per student: timed runs hold the node's one timing slot alone, so they
    never overlap, however many students are graded at once. A node never finishes before one
    student's grading does. Queue waits, shared file systems and stragglers are not modelled."""
    if students < 1 or nodes < 1:
        raise ValueError(f"a plan needs at least one student and one node (got {students} and {nodes})")
    per_node = math.ceil(students / nodes)
    seconds, bound = _node_seconds(costs, per_node, job_start_seconds)
    one_node, _ = _node_seconds(costs, students, job_start_seconds)
    return Projection(students, nodes, per_node, round(seconds, 1), bound, round(one_node, 1))


def clock(seconds):
    """`12 min 05 s`, `2 h 03 min 40 s`."""
    seconds = round(seconds)
    hours, minutes, secs = seconds // 3600, seconds % 3600 // 60, seconds % 60
    return f"{hours} h {minutes:02d} min {secs:02d} s" if hours else f"{minutes} min {secs:02d} s"


def plan_text(costs, students, nodes, job_start_seconds=JOB_START_SECONDS):
    """What `handson autograde --plan STUDENTS --nodes N` prints: where the costs were measured,
    the cost per student by group, and the projection on N nodes and on one."""
    plan = project(costs, students, nodes, job_start_seconds)
    lines = [f"Measured on {costs['host']}: {costs['students']} student(s) in {clock(costs['wall_seconds'])} "
             f"({costs['wall_seconds']:.0f} s), {costs['jobs']} at a time on {costs['cores']} core(s); "
             f"the references first: {costs['reference_seconds']:.0f} s.",
             "Per student (mean seconds; students graded at once overlap, the timed runs never do):"]
    lines += [f"  {costs['per_student'].get(group, 0.0):8.1f}  {group}" for group in GROUPS]
    lines.append(f"  {costs['wall_seconds_per_student']:8.1f}  wall time per student "
                 f"(the session less the references, over the students)")
    lines += [f"Projected for {students} student(s), nodes like {costs['host']}, "
              f"{job_start_seconds:.0f} s to start each node's job:",
              f"  on {nodes} node(s), {plan.per_node} student(s) each: {clock(plan.seconds)} "
              f"({plan.seconds:.0f} s; set by {plan.bound})",
              f"  on 1 node: {clock(plan.one_node_seconds)} ({plan.one_node_seconds:.0f} s)"]
    return "\n".join(lines)


def plan_table(costs, sizes=(42, 200, 1000), nodes=(1, 4, 8), job_start_seconds=JOB_START_SECONDS):
    """The projections as a Markdown table for the README: a row per class size, a column per
    node count."""
    lines = ["| students | " + " | ".join(f"{n} node{'s' if n > 1 else ''}" for n in nodes) + " |",
             "|---:|" + "---:|" * len(nodes)]
    for size in sizes:
        cells = [clock(project(costs, size, n, job_start_seconds).seconds) for n in nodes]
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
