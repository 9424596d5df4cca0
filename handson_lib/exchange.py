"""nbgrader's exchange, with submissions that only their student and the course's staff can read.

nbgrader makes a submission in the exchange's inbound/ readable, and its folder writable, by every
account of the machine: a timestamp and a random string in its name are all that hide it from
the other students. In the course's JupyterHub the students submit through
`PrivateSubmit` instead (nbgrader's ExchangeFactory.submit): the same submission, whose folder
then admits its student and the instructor's group only. inbound/ is set-group-ID and belongs to
the instructor's group, so the folder does too: the instructor still collects and deletes it;
another student cannot enter it even knowing its name.

Imported by nbgrader in the students' servers: ships in the student edition (it needs nbgrader,
which the classroom installs beside it).
"""

import os

from nbgrader.exchange.default.submit import ExchangeSubmit

SUBMISSION_MODE = 0o770  # the student and the instructor's group; nobody else may enter


class PrivateSubmit(ExchangeSubmit):
    def copy_files(self):
        super().copy_files()
        os.chmod(os.path.join(self.inbound_path, self.assignment_filename), SUBMISSION_MODE)
