"""Recorded outputs: what a long cell printed, shown below it (its `ref-<cell id>` markdown cell)
so that a student can read ahead while their own run goes, made by one command:

    handson build --record [NOTEBOOK ...]

For each language, the recording writes the student edition into a temporary folder, fills in the
instructor's answers (solution regions, the solved scripts), and runs each notebook that has
recorded cells there with the course's Python and the edition's library first on the path: the
edition's own mode (no reference solution: the self-checks' lines a student gets) and its
language (HANDSON_LANG). One run per notebook and language: every number of a notebook's recorded
cells comes from that run. It keeps what each recorded cell printed in
solutions/recorded/<lang>/<notebook>.json, with the machine, its load when the run started and
the date; every `ref-` cell is rendered from that file (the English ones written into
solutions/, the others by `handson build`). `handson build --check` fails when a `ref-` cell is
not the rendering of its record or its code cell changed since it was recorded.
"""

import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from handson_lib import COURSE_ROOT, settings
from handson_lib.settings import LANGUAGES

#: Folder of solutions/ that holds the records (one per language and notebook).
RECORDED = "recorded"
#: A recorded cell's output shows in the markdown cell of this id prefix right after it.
REF_PREFIX = "ref-"
#: How a recorded output shows the folder of the student edition it ran in.
STUDENT_FOLDER = "~/course"
#: Seconds one cell of a recording may run (02's Task #2 runs and self-check are the longest).
CELL_TIMEOUT = 1200

#: Each language's record is a run of its own, and two runs differ: a speed follows the machine's
#: load, and a ChainerMN run's accuracy the order scatter_dataset(shuffle=True) deals the data in,
#: which it draws without the seed. Said on every label, so that no one reads the editions'
#: different numbers as a translation's error (issue 40: 02's 2.04x against 1.75x).
LABELS = {
    "en": "Reference output, recorded on {date} in the student edition on {machine}. Yours will differ, "
          "as any two runs do (the speed with the machine's load, a ChainerMN run's accuracy with the "
          "data order `scatter_dataset` draws without the seed; the Japanese edition's is another run):",
    "ja": "参考出力（{date} に受講者版で記録。マシン: {machine}。あなたの結果は、2 回の実行がそうであるように"
          "異なります。速度はマシンの負荷で、ChainerMN の実行の精度は `scatter_dataset` が乱数シードを使わずに"
          "決めるデータの順序で変わります。英語版の参考出力は別の実行です）:",
}
MACHINE = {
    "en": "a {cores}-core CPU machine {gpu} ({system}, Python {python}; load average {load:.1f} when the "
          "notebook started)",
    "ja": "{cores} コアの CPU、{gpu}、{system}、Python {python}、ノートブック開始時のロードアベレージ {load:.1f}",
}
GPU = {"en": ("without a GPU", "with {gpus}"), "ja": ("GPU なし", "{gpus}")}
#: Said below the label when a recorded output had a question's answer hidden (HIDE).
HIDDEN_NOTE = {"en": "(A number that answers one of this notebook's questions shows as {mark}.)",
               "ja": "（このノートブックの問題の答えになる数値は {mark} と表示しています。）"}
HIDDEN_MARK = "…"


def _gradient_bytes_of_04(cells):
    """Exercise 2 of 04: L, the gradient bytes of the notebook's model (its allreduce benchmark
    prints it, and a student reading ahead must not find it)."""
    from handson_lib.autograder import answers
    model = re.search(r'model="(\w+)"', "".join("".join(c["source"]) for c in cells)).group(1)
    value = answers.gradient_bytes(model)
    # (its size in MiB too: 2.079 MiB gave L to within a rounding)
    hidden = [f"{value:,}", str(value), f"{value / 2**20:.3f} MiB"]
    for p in (4, 8, 16):   # Exercise 2's traffic at p ranks (at p = 2 it is L itself)
        traffic = answers.allreduce_traffic_bytes(value, p)
        hidden += [f"{traffic:,.0f}", f"{traffic:.0f}", str(traffic), f"{traffic:,}"]
    return sorted(set(hidden), key=len, reverse=True)


#: notebook -> the texts of answers that a recorded output must not show (the grader's values).
HIDE = {"04_scaling.ipynb": _gradient_bytes_of_04}


class RecordingError(RuntimeError):
    pass


def record_path(root, lang, notebook):
    return Path(root) / "solutions" / RECORDED / lang / (Path(notebook).stem + ".json")


def load(root, lang, notebook):
    path = record_path(root, lang, notebook)
    return json.loads(path.read_text()) if path.exists() else None


def recorded_cells(cells):
    """{code cell id: its ref cell's id} for each code cell followed by a `ref-<id>` markdown cell."""
    found = {}
    for cell, following in zip(cells, cells[1:]):
        cid = cell.get("id")
        if cell.get("cell_type") == "code" and following.get("cell_type") == "markdown" \
                and following.get("id") == REF_PREFIX + str(cid):
            found[cid] = following["id"]
    return found


def source_hash(text):
    """A short digest of a text: what a record's cell came from, and (translations.en_hash) the
    English a translation was made from."""
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def inputs_hash(cells, cid, root=COURSE_ROOT):
    """What a recorded cell's output comes from, as a digest: the notebook's code cells up to it
    (answers included: a later cell runs the student's function) and the solved scripts and job
    scripts the notebook names. (The library is not in it: re-record after changing what it prints.)"""
    pieces = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            pieces.append("".join(cell["source"]))
        if cell.get("id") == cid:
            break
    named = "".join("".join(cell["source"]) for cell in cells)
    for path in sorted((Path(root) / "solutions").glob("*")):
        if path.suffix in (".py", ".sh") and path.name in named:
            pieces.append(path.name + "\n" + path.read_text())
    return source_hash("\n\x00".join(pieces))


def machine_text(machine, lang):
    gpus = machine.get("gpus") or []
    gpu = GPU[lang][0] if not gpus else GPU[lang][1].format(gpus=", ".join(gpus))
    return MACHINE[lang].format(gpu=gpu, **{k: v for k, v in machine.items() if k != "gpus"})


def render(record, cid, lang):
    """The markdown of the ref cell of code cell `cid` from its notebook's `record`."""
    label = LABELS[lang].format(date=record["date"], machine=machine_text(record["machine"], lang))
    entry = record["cells"][cid]
    if entry.get("hidden"):
        label += " " + HIDDEN_NOTE[lang].format(mark=HIDDEN_MARK)
    output = entry["output"].rstrip("\n")
    fence = "````" if "```" in output else "```"
    return f"{label}\n\n{fence}\n{output}\n{fence}"


def apply(nb, root, lang, notebook):
    """Put the rendering of each record into its ref cell of `nb` (nbformat, in place). A cell
    without a record keeps its text (build --check names it)."""
    record = load(root, lang, notebook)
    if not record:
        return nb
    cells = {c.get("id"): c for c in nb.cells}
    for cid, ref in recorded_cells(nb.cells).items():
        if cid in record["cells"]:
            cells[ref].source = render(record, cid, lang)
    return nb


def _notebooks_with_records(root):
    src = Path(root) / "solutions"
    for path in sorted(src.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        found = recorded_cells(cells)
        if found:
            yield path, cells, found


def problems(root=COURSE_ROOT):
    """Why a recorded output is not what the recording command made: a record missing, a code
    cell changed since it was recorded, an English ref cell that is not its record's rendering."""
    found = []
    for path, cells, refs in _notebooks_with_records(root):
        by_id = {c.get("id"): c for c in cells}
        for lang in LANGUAGES:
            record = load(root, lang, path.name)
            where = f"solutions/{RECORDED}/{lang}/{path.stem}.json"
            if record is None:
                found.append((where, f"missing: `handson build --record {path.name}`"))
                continue
            for cid, ref in refs.items():
                entry = record["cells"].get(cid)
                if entry is None:
                    found.append((where, f"cell {cid} was not recorded: `handson build --record {path.name}`"))
                elif entry["source_hash"] != inputs_hash(cells, cid, root):
                    found.append((where, f"cell {cid}, a code cell before it or a solved script changed since it "
                                         f"was recorded: `handson build --record {path.name}`"))
                elif lang == "en" and "".join(by_id[ref]["source"]) != render(record, cid, lang):
                    found.append((f"solutions/{path.name}", f"cell {ref} is not the rendering of its record "
                                                            f"({where}): `handson build --record {path.name}`"))
            for cid in set(record["cells"]) - set(refs):
                found.append((where, f"cell {cid} has no ref cell any more: `handson build --record {path.name}`"))
    return found


# ----------------------------------------------------------------------------- recording

def _without_markers(text):
    """A solved piece: the solution regions kept, hidden tests and the marker lines removed."""
    text = re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[^\n]*\n?", "", text, flags=re.S)
    return "".join(line for line in text.splitlines(keepends=True)
                   if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


def fill_answers(edition, root=COURSE_ROOT, script_text=None):
    """The instructor's answers in a copy of the student edition: the solved scripts in
    exercises/, each answer cell of notebooks/ by its grade id. `script_text(source)` gives a
    solved script as the edition's students have it (in another language, commented in it:
    translations.translated_script, passed in as the edition is); default: as it is."""
    edition = Path(edition)
    for source in sorted((Path(root) / "solutions").glob("*")):
        if source.suffix in (".py", ".sh"):
            text = script_text(source) if script_text else source.read_text()
            (edition / "exercises" / source.name).write_text(_without_markers(text))
        elif source.suffix == ".ipynb":
            answers = {c["metadata"]["nbgrader"]["grade_id"]: _without_markers("".join(c["source"]))
                       for c in json.loads(source.read_text())["cells"]
                       if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
            target = edition / "notebooks" / source.name
            nb = json.loads(target.read_text())
            for cell in nb["cells"]:
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                if grade_id in answers:
                    cell["source"] = answers[grade_id]
            target.write_text(json.dumps(nb))


def this_machine():
    """What the labels say of the machine the recording runs on."""
    import importlib.util
    gpus = []
    try:   # the GPUs the notebooks ran on: none without CuPy (the CPU stand-in)
        if importlib.util.find_spec("cupy") is not None:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30)
            gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        system = platform.freedesktop_os_release().get("PRETTY_NAME", platform.system())
    except OSError:
        system = platform.system()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cores": cores, "gpus": gpus, "system": system.split(" (")[0],
            "python": platform.python_version(), "load": round(os.getloadavg()[0], 1)}


#: Runs one notebook in the edition (argv: notebook, cell ids); prints {id: output} as JSON.
_EXECUTE = r"""
import json, re, sys
import nbformat
from nbclient import NotebookClient
path, ids, timeout = sys.argv[1], set(sys.argv[3:]), int(sys.argv[2])
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=timeout, kernel_name="python3",
               resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
ansi = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
out = {}
for cell in nb.cells:
    if cell.get("id") in ids:
        pieces = []
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                pieces.append(o.text)
            elif o.output_type in ("execute_result", "display_data") and "text/plain" in o.get("data", {}) \
                    and "image/png" not in o["data"] and "image/svg+xml" not in o["data"]:
                pieces.append(o["data"]["text/plain"] + "\n")
        lines = ansi.sub("", "".join(pieces)).split("\n")
        out[cell["id"]] = "\n".join(line.split("\r")[-1].rstrip() for line in lines).strip("\n")
print("RECORDED " + json.dumps(out))
"""


def record(write_edition, root=COURSE_ROOT, notebooks=None, languages=LANGUAGES, out=print, translated_script=None):
    """Record the notebooks (names; default: every notebook with recorded cells) in each
    language; write the records and the English ref cells. Returns the records' paths.
    `write_edition(folder, root=, lang=)` writes the student edition the notebooks run in
    (release.release_student, passed in: the release is built on this module, not under it);
    `translated_script(source, lang, root)` a solved script in another language (translations')."""
    chosen = [(p, cells, refs) for p, cells, refs in _notebooks_with_records(root)
              if not notebooks or p.name in notebooks or p.stem in notebooks]
    if notebooks and len(chosen) != len(set(notebooks)):
        known = [p.name for p, _, _ in _notebooks_with_records(root)]
        raise RecordingError(f"notebooks with recorded cells: {', '.join(known)}")
    written = []
    for lang in languages:
        with tempfile.TemporaryDirectory(prefix=f"handson-record-{lang}-") as tmp:
            edition = Path(tmp) / "edition"
            write_edition(edition, root=root, lang=lang)
            fill_answers(edition, root, None if lang == "en" or not translated_script else
                         lambda source: translated_script(source, lang, root))
            # The edition's own root; no local cluster: the notebooks' ranks run on this machine.
            recorded = settings.current().but(root=None, lang=lang, cluster_dir=str(Path(tmp) / "no-cluster"))
            env = settings.child_env(carried=recorded.but(grader=recorded.grader.but(site="local")),
                                     PYTHONPATH=str(edition), MPLBACKEND="Agg")
            env.pop("VIRTUAL_ENV", None)
            for path, cells, refs in chosen:
                machine = this_machine()
                out(f"recording {path.name} ({lang}) on {machine_text(machine, 'en')} ...")
                started = datetime.datetime.now()
                res = subprocess.run([sys.executable, "-c", _EXECUTE, str(edition / "notebooks" / path.name),
                                      str(CELL_TIMEOUT), *refs], cwd=edition / "notebooks", env=env,
                                     capture_output=True, text=True)
                line = next((l for l in res.stdout.splitlines() if l.startswith("RECORDED ")), None)
                if res.returncode != 0 or line is None:
                    raise RecordingError(f"{path.name} ({lang}) did not run to the end:\n{res.stderr[-3000:]}")
                # the temporary edition's folder reads as the student's own course folder
                outputs = json.loads(line[len("RECORDED "):])
                for folder in sorted({str(edition), str(edition.resolve())}, key=len, reverse=True):
                    outputs = {cid: text.replace(folder, STUDENT_FOLDER) for cid, text in outputs.items()}
                for folder in sorted({str(tmp), str(Path(tmp).resolve())}, key=len, reverse=True):
                    outputs = {cid: text.replace(folder, "/tmp/…") for cid, text in outputs.items()}
                secrets = HIDE[path.name](cells) if path.name in HIDE else []
                hidden = {}
                for cid, text in outputs.items():
                    for secret in secrets:
                        if secret in text:
                            text, hidden[cid] = text.replace(secret, HIDDEN_MARK), True
                    outputs[cid] = text
                data = {"notebook": path.name, "lang": lang, "date": started.date().isoformat(),
                        "seconds": round((datetime.datetime.now() - started).total_seconds()),
                        "machine": machine,
                        "commit": _commit(root),
                        "cells": {cid: {"source_hash": inputs_hash(cells, cid, root),
                                        "output": outputs.get(cid, ""), **({"hidden": True} if hidden.get(cid) else {})}
                                  for cid in refs}}
                target = record_path(root, lang, path.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
                written.append(target)
                out(f"  {target.relative_to(root)} ({data['seconds']} s)")
                if lang == "en":
                    _write_english_ref_cells(path, data)
    return written


def _commit(root):
    """The course's commit the recording ran on, `-dirty` when files differed from it."""
    try:
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _write_english_ref_cells(path, record_data):
    nb = json.loads(path.read_text())
    cells = {c.get("id"): c for c in nb["cells"]}
    for cid, ref in recorded_cells(nb["cells"]).items():
        text = render(record_data, cid, "en")
        lines = text.split("\n")
        cells[ref]["source"] = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
