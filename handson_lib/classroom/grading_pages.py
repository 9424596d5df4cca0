"""The grading service's page (`/services/grading/`, behind the hub's login), in the class's language.

A student sees their own submissions only: each one's phases with their times (submitted, queued
and its place, grading, graded, feedback released), the score per part and the link to the
feedback. The staff (the instructor) see the queue, every student's latest state and score, the
score distribution, the throughput-ratio plot of the CSV report, and can grade a student or the
class again. The page reloads itself every few seconds.

Who may see what is decided here, once (`whose`), from the hub's user model: a student who asks
for another student's state, or for their feedback, gets 403, through the page as through the API
with a token of their own. The feedback (a student's notebook rendered) is served as a sandboxed
document (CSP `sandbox`): nothing in it runs on the hub's origin, not even for the instructor.

Rendering is pure (`student_page`, `staff_page`: rows in, HTML out; quick tier); `serve` runs the
tornado application the hub proxies to (it only reads the queue: the worker, a process of its own,
writes it).
"""

import html
import io
import json
import os
import re
import time
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from tornado import ioloop, web

from handson_lib import settings, tasks
from handson_lib.classroom import accounts, grading_queue
from handson_lib.classroom.grading_queue import Store
from handson_lib.messages import tr

#: Seconds between two reloads of the page.
RELOAD = 10
#: What a feedback file's name may be (nbgrader writes NOTEBOOK.html).
FEEDBACK_FILE = re.compile(r"[A-Za-z0-9_.-]{1,100}\.html")
ASSIGNMENTS = tuple(a.name for a in tasks.ASSIGNMENTS)
#: The feedback is a student's notebook rendered: a document with no origin, no script, no form.
FEEDBACK_HEADERS = {"Content-Security-Policy": "sandbox; default-src 'none'; style-src 'unsafe-inline'; "
                                               "img-src data:; font-src data:",
                    "X-Content-Type-Options": "nosniff", "Content-Type": "text/html; charset=utf-8"}


#: What the service adds to a graded submission's status when its feedback could not be made.
FEEDBACK_FAILED = "its feedback could not be made"


class Forbidden(Exception):
    """A request for what the user may not see."""


def is_staff(user):
    """Whether the hub's user model is the class's staff (the instructor's account)."""
    return bool(user) and user.get("kind", "user") == "user" and user.get("name") == accounts.INSTRUCTOR


def whose(user, asked=None):
    """The student whose submissions a request shows: the user's own; another's (`asked`) only to
    the staff; None: the whole class (the staff, asking for no one). Forbidden otherwise."""
    if not user or user.get("kind", "user") != "user" or not user.get("name"):
        raise Forbidden("not a user of the hub")
    if asked and asked != user["name"]:
        if not is_staff(user):
            raise Forbidden(f"{user['name']} may not see {asked}'s submissions")
        return asked
    return None if is_staff(user) and not asked else user["name"]


# ----------------------------------------------------------------------------- rendering (pure)

def when(seconds):
    return time.strftime("%H:%M:%S", time.localtime(seconds)) if seconds is not None else ""


def state_text(row, place):
    """The state of a submission in the reader's language, with its place in the queue."""
    if row.state == grading_queue.QUEUED:
        number, why = place or (None, None)
        if number:
            return tr("queued: place {place}", place=number)
        if why == "in_flight":
            return tr("queued: after your grading in progress")
        if why == "limit":
            return tr("queued: you reached the limit of gradings per hour; graded when the hour allows")
        return tr("queued")
    return {grading_queue.SUPERSEDED: tr("replaced by a newer submission"), grading_queue.GRADING: tr("grading"),
            grading_queue.GRADED: tr("graded, feedback being released"),
            grading_queue.RELEASED: tr("feedback released"), grading_queue.REFUSED: tr("not graded"),
            grading_queue.FAILED: tr("not graded")}[row.state]


def phase_list(row, place):
    """The submission's phases with their times, as HTML (PrairieLearn's: a wait in the queue is
    not a slow grader)."""
    words = {"submitted": tr("submitted"), "queued": tr("queued"), "grading": tr("grading started"),
             "graded": tr("graded"), "released": tr("feedback released")}
    items = []
    for phase, at in grading_queue.phases(row):
        if at is not None:
            extra = ""
            if phase == "queued" and row.state == grading_queue.QUEUED and place and place[0]:
                extra = " " + tr("(place {place})", place=place[0])
            items.append(f"<li class='phase {phase}'>{html.escape(words[phase])} {when(at)}{html.escape(extra)}</li>")
    return "<ul class='phases'>" + "".join(items) + "</ul>"


def score_text(row):
    if row.score is None or row.state not in (grading_queue.GRADED, grading_queue.RELEASED):
        return ""
    parts = ", ".join(f"{html.escape(cell)} {score:g}/{most:g}" for cell, (score, most) in row.part_scores().items()
                      if score is not None)
    return (f"<b>{row.score:g} / {row.max_score:g}</b>" if row.max_score else f"<b>{row.score:g}</b>") + \
        (f"<div class='parts'>{parts}</div>" if parts else "")


def feedback_links(row, feedback_files, student=None):
    """Links to the released feedback of the row's assignment (the files nbgrader made)."""
    if row.state != grading_queue.RELEASED:
        return ""
    query = f"?student={student}" if student else ""
    return " ".join(f"<a href='feedback/{html.escape(row.assignment)}/{html.escape(name)}{query}' target='_blank'>"
                    f"{html.escape(tr('feedback'))}: {html.escape(name)}</a>" for name in feedback_files)


def submission_rows(rows, places, feedback_files, student=None):
    """The table rows of a student's submissions, newest first."""
    out = []
    for row in rows:
        said = row.state in (grading_queue.REFUSED, grading_queue.FAILED) or (
            row.state == grading_queue.GRADED and FEEDBACK_FAILED in (row.status or ""))
        why = f"<div class='why'>{html.escape(row.status or '')}</div>" if said else ""
        out.append(f"<tr class='submission {row.state}' data-student='{html.escape(row.student)}' "
                   f"data-assignment='{html.escape(row.assignment)}'><td>{html.escape(row.assignment)}</td>"
                   f"<td class='state'>{html.escape(state_text(row, places.get(row.id)))}{why}</td>"
                   f"<td>{phase_list(row, places.get(row.id))}</td><td class='score'>{score_text(row)}</td>"
                   f"<td>{feedback_links(row, feedback_files.get(row.assignment, []), student)}</td></tr>")
    return "".join(out)


STYLE = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}"
         "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}.phases{margin:0;padding-left:1em}"
         ".why{color:#a00;font-size:90%}.parts{font-size:85%;color:#444}.bar{background:#4a7;height:1em}")


def page(title, body):
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='{RELOAD}'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"{body}</body></html>")


def table(headers, rows_html, css=""):
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f"<table class='{css}'><tr>{head}</tr>{rows_html}</table>"


def student_page(student, rows, places, feedback_files):
    """A student's own submissions (newest first); `feedback_files`: {assignment: [file names]}."""
    headers = [tr("assignment"), tr("state"), tr("phases"), tr("score"), tr("feedback")]
    body = (f"<p>{html.escape(tr('Signed in as {name}. Each submission is graded in turn; this page reloads by itself.', name=student))}</p>"
            + (table(headers, submission_rows(rows, places, feedback_files), "mine") if rows else
               f"<p>{html.escape(tr('No submission yet: submit from the Assignments tab.'))}</p>"))
    return page(tr("Grading of your submissions"), body)


def distribution(latest, assignment):
    """Bars of how many students have each score (their latest graded submission)."""
    counts = {}
    for row in latest:
        if row.assignment == assignment and row.score is not None and row.state in (
                grading_queue.GRADED, grading_queue.RELEASED):
            counts[row.score] = counts.get(row.score, 0) + 1
    if not counts:
        return ""
    most = max(counts.values())
    rows = "".join(f"<tr><td>{score:g}</td><td>{n}</td><td style='width:20em'><div class='bar' "
                   f"style='width:{100 * n / most:.0f}%'></div></td></tr>" for score, n in sorted(counts.items()))
    return table([tr("score"), tr("students"), ""], rows, f"distribution {assignment}")


def staff_page(queued, places, grading, latest, plotted, xsrf_form):
    """The class: the queue, every student's latest state and score, the distributions, the plots
    (`plotted`: the assignments with a throughput plot), and the forms that grade again."""
    queue_rows = "".join(f"<tr class='queued'><td>{html.escape(r.student)}</td><td>{html.escape(r.assignment)}</td>"
                         f"<td>{html.escape(state_text(r, places.get(r.id)))}</td><td>{when(r.seen)}</td></tr>"
                         for r in queued)
    queue_rows += "".join(f"<tr class='grading'><td>{html.escape(r.student)}</td><td>{html.escape(r.assignment)}</td>"
                          f"<td>{html.escape(tr('grading'))} (job {r.job})</td><td>{when(r.started)}</td></tr>"
                          for r in grading)
    regrade = "".join(f"<form method='post' action='api/regrade' class='regrade'>{xsrf_form}"
                      f"<input type='hidden' name='assignment' value='{html.escape(a)}'>"
                      f"<input type='hidden' name='student' value='*'><button>"
                      f"{html.escape(tr('Grade everyone again: {assignment}', assignment=a))}</button></form>"
                      for a in sorted({r.assignment for r in latest}))
    students = "".join(
        f"<tr class='latest {r.state}' data-student='{html.escape(r.student)}'><td>{html.escape(r.student)}</td>"
        f"<td>{html.escape(r.assignment)}</td><td>{html.escape(state_text(r, places.get(r.id)))}</td>"
        f"<td class='score'>{score_text(r)}</td><td>{phase_list(r, places.get(r.id))}</td>"
        f"<td><form method='post' action='api/regrade'>{xsrf_form}<input type='hidden' name='assignment' "
        f"value='{html.escape(r.assignment)}'><input type='hidden' name='student' value='{html.escape(r.student)}'>"
        f"<button>{html.escape(tr('grade again'))}</button></form></td></tr>" for r in latest)
    parts = [f"<h2>{html.escape(tr('Queue'))}</h2>",
             table([tr("student"), tr("assignment"), tr("state"), tr("since")], queue_rows, "queue"),
             f"<h2>{html.escape(tr('Every student'))}</h2>", regrade,
             table([tr("student"), tr("assignment"), tr("state"), tr("score"), tr("phases"), ""], students, "class")]
    for assignment in sorted({r.assignment for r in latest}):
        parts.append(f"<h2>{html.escape(assignment)}</h2>{distribution(latest, assignment)}")
        if assignment in plotted:
            parts.append(f"<img src='plot/{html.escape(assignment)}.png' alt='throughput ratios'>")
    return page(tr("Grading of the class"), "".join(parts))


def throughput_png(course, assignment):
    """The throughput-ratio plot of the CSV report (grading_report's), as PNG bytes; None without ratios."""
    from handson_lib.autograder.grading_report import finite, read_report, throughput_figure
    from handson_lib.checking import checks
    rows = [r for r in read_report(course, assignment).values()
            if finite(str(r["throughput_ratio"])) is not None or finite(str(r["scaling_ratio"])) is not None]
    if not rows:
        return None
    figure = throughput_figure(rows, checks.site_thresholds(None)["throughput_bands"], f"{assignment}: throughput ratios")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- the service's web side

def feedback_files(course, student):
    """{assignment: [feedback file names]} of the student's generated feedback."""
    found = {}
    for assignment in ASSIGNMENTS:
        folder = course / "feedback" / student / assignment
        if folder.is_dir():
            found[assignment] = sorted(p.name for p in folder.iterdir() if FEEDBACK_FILE.fullmatch(p.name))
    return found


class _Base(HubOAuthenticated, web.RequestHandler):
    """A page of the service: the hub's user (OAuth), the course's folder and the queue."""

    def initialize(self, lay, store):
        self.lay, self.store = lay, store

    def student(self):
        try:
            return whose(self.current_user, self.get_argument("student", None))
        except Forbidden as err:
            raise web.HTTPError(403, str(err)) from None

    def places(self):
        since = self.store.started_since(time.time() - grading_queue.HOUR)
        return grading_queue.places(self.store.queued(), {r.student for r in self.store.grading()}, since,
                                    settings.current().gradings_per_hour)


class PageHandler(_Base):
    @web.authenticated
    def get(self):
        student, store = self.student(), self.store
        if student:
            self.finish(student_page(student, store.of_student(student), self.places(),
                                     feedback_files(self.lay.course, student)))
            return
        latest = store.everyone_latest()
        plotted = {a for a in {r.assignment for r in latest} if (self.lay.course / f"autograde_{a}.csv").exists()}
        self.finish(staff_page(store.queued(), self.places(), store.grading(), latest, plotted, self.xsrf_form_html()))


class StateHandler(_Base):
    @web.authenticated
    def get(self):
        student = self.student()
        rows = self.store.of_student(student) if student else self.store.everyone_latest()
        places = self.places()
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"user": self.current_user["name"], "staff": student is None, "submissions": [
            {**{k: getattr(r, k) for k in ("name", "student", "assignment", "state", "score", "max_score", "status",
                                           "tries")},
             "place": (places.get(r.id) or (None, None))[0], "phases": dict(grading_queue.phases(r)),
             "parts": r.part_scores()} for r in rows]}))


class RegradeHandler(_Base):
    @web.authenticated
    def post(self):
        if not is_staff(self.current_user):
            raise web.HTTPError(403, "only the staff grade again")
        assignment, asked = self.get_argument("assignment"), self.get_argument("student")
        names = sorted({r.student for r in self.store.everyone_latest() if r.assignment == assignment}) \
            if asked == "*" else [asked]
        queued = [n for n in names if self.store.regrade(n, assignment, time.time())]
        if self.request.headers.get("Accept", "").startswith("application/json"):
            self.finish(json.dumps({"queued": queued}))
        else:
            self.redirect(self.reverse_url("page"), status=303)


class FeedbackHandler(_Base):
    @web.authenticated
    def get(self, assignment, name):
        student = self.student() or self.current_user["name"]
        path = self.lay.course / "feedback" / student / assignment / name
        if assignment not in ASSIGNMENTS or not FEEDBACK_FILE.fullmatch(name) or path.is_symlink() or not path.is_file():
            raise web.HTTPError(404)
        for header, value in FEEDBACK_HEADERS.items():
            self.set_header(header, value)
        self.finish(path.read_bytes())


class PlotHandler(_Base):
    @web.authenticated
    def get(self, assignment):
        if not is_staff(self.current_user):
            raise web.HTTPError(403, "only the staff see the class's plot")
        png = throughput_png(self.lay.course, assignment) if assignment in ASSIGNMENTS else None
        if png is None:
            raise web.HTTPError(404)
        self.set_header("Content-Type", "image/png")
        self.finish(png)


def application(lay, store, prefix):
    given = {"lay": lay, "store": store}
    return web.Application([
        web.url(prefix, PageHandler, given, name="page"),
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
        (prefix + "api/state", StateHandler, given),
        (prefix + "api/regrade", RegradeHandler, given),
        (prefix + r"feedback/([A-Za-z0-9_-]+)/([^/]+)", FeedbackHandler, given),
        (prefix + r"plot/([A-Za-z0-9_-]+)\.png", PlotHandler, given),
    ], cookie_secret=os.urandom(32))


def serve(lay, watch=None):
    """The page, at the address the hub gave the service; `watch()` every few seconds (the
    service's worker still runs)."""
    HubOAuth.instance()   # from the hub's variables
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/grading/")
    address = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8002"))
    application(lay, Store(lay.grading / "queue.sqlite"), prefix).listen(address.port, address.hostname)
    if watch is not None:
        ioloop.PeriodicCallback(watch, 5000).start()
    ioloop.IOLoop.current().start()
