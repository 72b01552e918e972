"""``python -m toolkeep`` runs the command line."""

from .cli import main

main()
