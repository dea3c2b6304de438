from processkit.cli.main import main

raise SystemExit(main())
