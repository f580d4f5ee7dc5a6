"""Reading existing verl launches: run a launch script under real bash in a jail
and capture what it launches (:mod:`tutorrl.importer.capture`)."""
