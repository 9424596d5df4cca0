"""handson_lib: the one library that the course's notebooks, scripts and graders import.

Modules are imported lazily by their users so that `import handson_lib` stays cheap
(it must not import CuPy: MultiprocessParallelUpdater forks, see handson_lib.runtime.mpi).
"""

from pathlib import Path

from handson_lib import settings

__version__ = "0.1.0"

#: Root of the course checkout (the folder holding notebooks/ and exercises/).
COURSE_ROOT = Path(settings.one("root") or Path(__file__).resolve().parent.parent)
