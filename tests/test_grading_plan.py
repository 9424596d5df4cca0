"""The grading plan (handson_lib.autograder.grading_plan): a session's costs per student by group,
kept as JSON, and their projection onto a class graded on several nodes."""

import json

import pytest

from handson_lib.autograder import grading_plan as plan
from handson_lib.autograder.grading_plan import REST, TIMED, UNTIMED, WAITING

PAIRED = "multi-node: timing on 1 rank(s), the reference's steps and yours in turn"
OWN_RUN = "multi-node: your 2-rank run"
REFERENCE = "reference train_cifar_multi_node.py on 2 rank(s): --epochs 1"


def student(name, seconds, parts):
    return {"student": name, "status": "graded", "seconds": seconds, "parts": parts}


def class_results():
    """Two students: one measured the reference (timed by its name), one waited for the slot."""
    return [
        student("ada", 100.0, [{"part": OWN_RUN, "seconds": 20.0, "waited": 5.0},
                               {"part": PAIRED, "seconds": 30.0, "waited": 0.0},
                               {"part": REFERENCE, "seconds": 10.0}]),
        student("bob", 80.0, [{"part": OWN_RUN, "seconds": 16.0, "waited": 9.0},
                              {"part": PAIRED, "seconds": 24.0},
                              {"part": "notebook: demo", "seconds": 4.0, "timed": True}]),
    ]


def costs_of(wall=200.0, reference=20.0, results=None):
    return plan.session_costs(results or class_results(), wall_seconds=wall, jobs=4, cores=2,
                              reference_seconds=reference, host="gradebox")


def test_parts_are_timed_by_their_flag_or_else_by_their_name():
    assert plan.is_timed({"part": PAIRED, "seconds": 1})
    assert plan.is_timed({"part": REFERENCE, "seconds": 1})
    assert not plan.is_timed({"part": OWN_RUN, "seconds": 1})
    assert not plan.is_timed({"part": PAIRED, "seconds": 1, "timed": False})
    assert plan.is_timed({"part": "notebook: x", "seconds": 1, "timed": True})


def test_session_costs_groups_each_students_time_and_means_them():
    costs = costs_of()
    # ada: timed 30 + 10, untimed 20, waited 5, rest 100 - 65 = 35;
    # bob: timed 24 + 4, untimed 16, waited 9, rest 80 - 53 = 27.
    assert costs["per_student"] == {TIMED: 34.0, UNTIMED: 18.0, WAITING: 7.0, REST: 31.0}
    assert sum(costs["per_student"].values()) == pytest.approx((100.0 + 80.0) / 2)
    assert costs["timed_seconds_per_student"] == 34.0
    assert costs["wall_seconds_per_student"] == (200.0 - 20.0) / 2
    assert costs["student_seconds"] == 90.0
    assert (costs["students"], costs["jobs"], costs["cores"], costs["host"]) == (2, 4, 2, "gradebox")
    assert costs["by_part"][PAIRED] == {"group": TIMED, "seconds": 27.0}
    assert costs["by_part"][OWN_RUN] == {"group": UNTIMED, "seconds": 18.0}
    assert costs["by_part"]["notebook: demo"] == {"group": TIMED, "seconds": 2.0}
    assert json.loads(json.dumps(costs)) == costs


def test_session_costs_refuses_an_empty_session():
    with pytest.raises(ValueError, match="no student"):
        plan.session_costs([], 10.0, 2, 2, 0.0, "gradebox")


def test_the_timed_runs_are_a_floor_on_a_node():
    # The students overlapped well (20 s of wall each) but each timed 50 s alone.
    results = [student(f"s{i}", 60.0, [{"part": PAIRED, "seconds": 50.0}]) for i in range(4)]
    costs = costs_of(wall=100.0, reference=20.0, results=results)
    assert costs["wall_seconds_per_student"] == 20.0
    projection = plan.project(costs, 10, 1, job_start_seconds=5.0)
    assert projection.seconds == 20.0 + 5.0 + 10 * 50.0
    assert projection.bound == "the timed runs, one after another"


def test_project_splits_the_class_with_ceil_division():
    costs = costs_of()   # 90 s of wall per student, 34 s timed
    projection = plan.project(costs, 10, 4, job_start_seconds=0.0)
    assert projection.per_node == 3
    assert projection.seconds == 20.0 + 3 * 90.0
    assert projection.bound == "the measured wall time per student"
    assert projection.one_node_seconds == 20.0 + 10 * 90.0
    assert plan.project(costs, 10, 1, job_start_seconds=0.0).seconds == projection.one_node_seconds


def test_a_node_with_few_students_takes_one_students_grading_at_least():
    costs = costs_of(wall=30.0, reference=20.0)   # 5 s of wall per student, 90 s for one student
    projection = plan.project(costs, 3, 8, job_start_seconds=0.0)
    assert (projection.per_node, projection.seconds) == (1, 20.0 + 90.0)
    assert projection.bound == "one student's grading"


@pytest.mark.parametrize("students", [1, 7, 42, 200, 1001])
def test_more_nodes_never_take_longer(students):
    costs = costs_of()
    times = [plan.project(costs, students, nodes).seconds for nodes in range(1, 20)]
    assert times == sorted(times, reverse=True)
    assert times[0] > times[-1] or students == 1


def test_project_refuses_no_students_or_no_nodes():
    with pytest.raises(ValueError):
        plan.project(costs_of(), 0, 2)
    with pytest.raises(ValueError):
        plan.project(costs_of(), 5, 0)


def test_costs_written_are_read_back(tmp_path):
    costs = costs_of()
    path = plan.write_costs(tmp_path / "costs.json", costs)
    assert plan.read_costs(path) == costs


@pytest.mark.parametrize("text, why", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"host": "gradebox", "students": 2}), "lack wall_seconds"),
])
def test_read_costs_names_the_file_and_what_is_wrong(tmp_path, text, why):
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=why) as caught:
        plan.read_costs(path)
    assert str(path) in str(caught.value)


def test_read_costs_refuses_wrong_types_and_a_missing_file(tmp_path):
    costs = dict(costs_of(), students="two")
    path = plan.write_costs(tmp_path / "typed.json", costs)
    with pytest.raises(ValueError, match="wrong type: students"):
        plan.read_costs(path)
    with pytest.raises(ValueError, match="cannot read") as caught:
        plan.read_costs(tmp_path / "absent.json")
    assert "absent.json" in str(caught.value)


def test_plan_text_shows_the_measurement_the_costs_and_the_projection():
    text = plan.plan_text(costs_of(), 10, 4, job_start_seconds=0.0)
    assert "gradebox: 2 student(s)" in text
    assert "4 at a time on 2 core(s)" in text
    assert "the references first: 20 s" in text
    assert "34.0  " + TIMED in text and "31.0  " + REST in text
    assert "90.0  wall time per student" in text
    # 4 nodes: 20 + 3 * 90 = 290 s; one node: 20 + 10 * 90 = 920 s.
    assert "on 4 node(s), 3 student(s) each: 4 min 50 s (290 s" in text
    assert "on 1 node: 15 min 20 s (920 s)" in text


def test_clock_reads_in_minutes_and_hours():
    assert plan.clock(65) == "1 min 05 s"
    assert plan.clock(3600 + 125) == "1 h 02 min 05 s"


def test_plan_table_has_a_row_per_size_and_a_column_per_node_count():
    costs = costs_of()
    table = plan.plan_table(costs, sizes=(10, 100), nodes=(1, 4), job_start_seconds=0.0).splitlines()
    assert table[0] == "| students | 1 node | 4 nodes |"
    assert table[1] == "|---:|---:|---:|"
    assert table[2] == "| 10 | 15 min 20 s | 4 min 50 s |"   # 920 s and 290 s
    assert table[3].startswith("| 100 | 2 h 30 min 20 s |")   # 20 + 100 * 90 = 9020 s
    assert len(table) == 4
