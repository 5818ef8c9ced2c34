"""python3 -m yard: the `yard` command (yard/_cli.py)."""
from ._cli import main

main()
