"""``python3 -m hostgraph ARGS...``: the ``hostgraph`` command, with the same
arguments, output and exit codes (it runs the command this package was built
or installed with: <build>/hostgraph, or <prefix>/bin/hostgraph)."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

from . import _capi


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    exe = os.path.join(_capi.bindir(), "hostgraph")
    if not os.access(exe, os.X_OK):
        print(f"hostgraph: the command is not at {exe} (set HOSTGRAPH_BINDIR)", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + list(args))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
