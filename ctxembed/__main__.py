"""``python -m ctxembed``."""

from ctxembed.cli import main

main()
