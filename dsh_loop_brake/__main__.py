"""Run the command line as ``python -m dsh_loop_brake``."""

from dsh_loop_brake._entry import main

raise SystemExit(main())
