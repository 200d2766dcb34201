"""`python -m shared.client`: the `a2a` command, where its console script is not installed."""

from shared.client.cli import main

raise SystemExit(main())
