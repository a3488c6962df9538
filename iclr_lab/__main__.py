from iclr_lab.cli import main

raise SystemExit(main())
