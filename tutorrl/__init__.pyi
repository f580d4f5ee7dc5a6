# The static face of the lazy `tutorrl` package (editors and type checkers
# cannot follow PEP 562's __getattr__): the names tutorrl/__init__.py exports
# (tests/cli/test_api.py holds the two lists equal).
from tutorrl.export.options import ExportOptions as ExportOptions
from tutorrl.importer.launch import ImportOptions as ImportOptions
from tutorrl.api import Run as Run
from tutorrl.runtime.options import RunOptions as RunOptions
from tutorrl.api import Verification as Verification
from tutorrl.api import add_checkpoint as add_checkpoint
from tutorrl.api import anchor as anchor
from tutorrl.api import check as check
from tutorrl.api import compare as compare
from tutorrl.api import compile as compile
from tutorrl.api import compile_family as compile_family
from tutorrl.api import compile_files as compile_files
from tutorrl.api import diff as diff
from tutorrl.api import evidence_records as evidence_records
from tutorrl.api import export_bundle as export_bundle
from tutorrl.api import import_script as import_script
from tutorrl.api import keygen as keygen
from tutorrl.api import keys_add as keys_add
from tutorrl.api import keys_import as keys_import
from tutorrl.api import keys_list as keys_list
from tutorrl.api import keys_lock as keys_lock
from tutorrl.api import keys_remove as keys_remove
from tutorrl.api import load as load
from tutorrl.api import logs as logs
from tutorrl.api import migrate as migrate
from tutorrl.api import model as model
from tutorrl.api import run as run
from tutorrl.api import run_set as run_set
from tutorrl.api import runs as runs
from tutorrl.api import schema as schema
from tutorrl.api import status as status
from tutorrl.api import stop as stop
from tutorrl.api import verify as verify
from tutorrl.api import write as write

__version__: str
__all__: list[str]
