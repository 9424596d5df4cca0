"""`handson bench self-check`: the student's self-check of a solved task, as the student types it
(`handson check TASK SCRIPT --against self`), run several times in a row, optionally beside busy
processes (a loaded machine): how long each check takes against the course's target, and how
steady its speed-up is (as timed, and as judged where the load held the steps back).
"""

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from handson_lib import COURSE_ROOT

#: A complete self-check of Task #1 on an idle 2-core machine should take at most this (issue 40).
TARGET_SECONDS = 90.0
SCRIPTS = {"multi-gpu": "train_cifar_multi_gpu.py", "multi-node": "train_cifar_multi_node.py"}
SPEED_NAMES = ("throughput:", "scaling:")


def speed_of(report):
    """(the speed-up as timed, the one judged, passed) of a self-check's JSON report."""
    for check in report["checks"]:
        if check["name"].startswith(SPEED_NAMES):
            timed = re.search(r": ([\d.]+)x your own 1-", check["message"])
            return (float(timed.group(1)) if timed else None), check["value"], check["passed"]
    return None, None, False


def one_check(task, script, timeout):
    """(seconds, JSON report) of one `handson check TASK SCRIPT --against self --json`."""
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "handson_lib.cli", "check", task, str(script), "--against", "self",
                          "--json"], capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    text = res.stdout[res.stdout.find("{"):]
    try:
        return seconds, json.loads(text)
    except ValueError:
        raise SystemExit(f"handson bench self-check: no report from the check (exit {res.returncode}):\n"
                         + (res.stdout + res.stderr)[-2000:]) from None


def run(task, repeat, load, timeout=600, print_fn=print):
    """The rows of `repeat` self-checks of the solution of `task` beside `load` busy processes."""
    script = COURSE_ROOT / "solutions" / SCRIPTS[task]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    rows = []
    try:
        for i in range(repeat):
            seconds, report = one_check(task, script, timeout)
            timed, judged, passed = speed_of(report)
            rows.append({"check": i + 1, "seconds": round(seconds, 1), "speedup_timed": timed,
                         "speedup_judged": judged, "speed_passed": passed, "all_passed": report["ok"]})
            print_fn(f"  check {i + 1}/{repeat}: {seconds:5.1f} s  speed-up {timed}x as timed, "
                     f"{judged:.2f}x judged  {'PASS' if passed else 'FAIL'}"
                     f"  ({sum(c['passed'] for c in report['checks'])} of {len(report['checks'])} checks passed)")
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    return rows


def summary(task, load, rows):
    seconds = [r["seconds"] for r in rows]
    judged = [r["speedup_judged"] for r in rows if r["speedup_judged"] is not None]
    timed = [r["speedup_timed"] for r in rows if r["speedup_timed"] is not None]
    return {
        "task": task, "background_load": load, "checks": len(rows),
        "all_passed": sum(r["all_passed"] for r in rows),
        "seconds_median": statistics.median(seconds),
        "seconds_vs_target": round(statistics.median(seconds) / TARGET_SECONDS, 2),
        "speedup_timed_spread": [min(timed), max(timed)] if timed else None,
        "speedup_judged_spread": [min(judged), max(judged)] if judged else None,
        "rows": rows,
    }


def add_arguments(parser):
    parser.add_argument("--task", choices=sorted(SCRIPTS), default="multi-gpu")
    parser.add_argument("--repeat", type=int, default=5, help="checks in a row (default 5)")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes beside the checks, a loaded machine (default 0)")
    parser.add_argument("--out", default=None, help="folder for self-check-<task>-load<N>.json")


def main(args):
    print(f"The self-check of the solved {args.task} script, {args.repeat} times in a row, beside {args.load} "
          f"busy process(es):")
    rows = run(args.task, args.repeat, args.load)
    result = summary(args.task, args.load, rows)
    print(f"  passed every check: {result['all_passed']} of {len(rows)}; median {result['seconds_median']:.1f} s = "
          f"{result['seconds_vs_target']:.2f} x the target of {TARGET_SECONDS:.0f} s")
    if result["speedup_timed_spread"]:
        low, high = result["speedup_timed_spread"]
        jlow, jhigh = result["speedup_judged_spread"]
        print(f"  speed-up as timed {low:.2f}-{high:.2f}x, as judged {jlow:.2f}-{jhigh:.2f}x")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"self-check-{args.task}-load{args.load}.json"
        path.write_text(json.dumps(result, indent=1))
        print(f"  written: {path}")
    return 0 if result["all_passed"] == len(rows) else 1
