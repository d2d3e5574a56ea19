"""The ``epistore`` command line, as installed by ``pip install``.

The console script ``epistore`` calls :func:`main`, which runs the same command line
as the ``epistore`` binary (it is compiled into the native module): ``epistore --help``.
"""

from __future__ import annotations

import signal
import sys
from typing import Sequence

from . import _native


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (like ``sys.argv``: the first item is the
    program name) and return its exit code: 0 success, 1 something wrong was found
    (a package was rejected, ``verify`` found damage), 2 an error.

    ``--help``, ``--version`` and bad arguments end the process, as the binary does.
    """
    args = list(sys.argv if argv is None else argv)
    # The program is `epistore` in help and errors, however it was started
    # (`python -m epistore._cli` names the file).
    args[:1] = ["epistore"]
    # Ctrl-C ends the command as it ends the binary (Python's handler would only set a
    # flag that nothing checks while Rust runs). `serve` and `ui` install their own.
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:  # not the main thread
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    return _native.run_cli(args)


if __name__ == "__main__":
    sys.exit(main())
