"""``python -m tinyagents``: the ``tinyagents`` command."""

from tinyagents.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
