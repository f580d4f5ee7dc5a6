# The static face of the lazy `tutorrl` package (editors and type checkers
# cannot follow PEP 562's __getattr__): the names tutorrl/__init__.py exports.
from tutorrl.api import Run as Run
from tutorrl.api import Verification as Verification
from tutorrl.api import compile as compile
from tutorrl.api import compile_family as compile_family
from tutorrl.api import diff as diff
from tutorrl.api import load as load
from tutorrl.api import run as run
from tutorrl.api import verify as verify
from tutorrl.api import write as write
from tutorrl.runtime.options import RunOptions as RunOptions

__version__: str
__all__: list[str]
