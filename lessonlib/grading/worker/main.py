"""Start the grading worker: ``python -I -B .../worker/main.py [--probe] [--lifeline FD] RUNNER WIRE``.

Run by path, never imported by the grading process. ``-I`` leaves this file's folder off
``sys.path``, so the folder above it goes there by hand: the worker's modules are imported as the
package ``worker`` beside this file, never through ``lessonlib``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from worker.zygote import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv))
