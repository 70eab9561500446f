from msc.cli import main

raise SystemExit(main())
