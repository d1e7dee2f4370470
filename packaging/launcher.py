"""Entry point frozen into the desktop bundle: ``sofa-gui`` is the CLI, ``sofa-gui-app`` the GUI.

Both executables share this script; the name they were started by picks the entry.
``freeze_support`` comes first: the app decodes big traces in a spawned child process,
which re-runs this executable.
"""

import multiprocessing
import os
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from sofa_gui.cli import entry, gui_main

    exe = os.path.splitext(os.path.basename(sys.argv[0]))[0].lower()
    if exe.endswith("-app"):
        sys.exit(gui_main())
    entry()
