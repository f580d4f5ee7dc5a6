from tutorrl.cli import entry

entry()
