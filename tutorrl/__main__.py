from tutorrl.cli import main

raise SystemExit(main())
