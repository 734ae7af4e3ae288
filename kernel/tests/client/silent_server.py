"""A "server" that reads its stdin and never answers: connecting to it must time out."""

import sys

for _line in sys.stdin:
    pass
