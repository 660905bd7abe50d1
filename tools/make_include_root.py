"""Makes an include root in the build tree: ROOT/lockstep/<name> links to the given headers, and ROOT/lockstep.hpp to
the umbrella header when one is given (an empty argument: none). Used by meson at configure time."""

import os
import shutil
import sys

root, umbrella, headers = sys.argv[1], sys.argv[2], sys.argv[3:]
shutil.rmtree(root, ignore_errors=True)
os.makedirs(os.path.join(root, "lockstep"))
if umbrella:
    os.symlink(umbrella, os.path.join(root, "lockstep.hpp"))
for header in headers:
    os.symlink(header, os.path.join(root, "lockstep", os.path.basename(header)))
