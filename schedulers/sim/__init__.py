"""The Vidur side (the only package that imports Vidur).

Env config, profiles and predictor, scheduler registration, the Gymnasium env and its reward context.

Importing it without Vidur installed raises an ImportError that names the command installing it.
"""

from importlib.util import find_spec

#: how to install what this package needs (Vidur's wheel lists ~100 packages its simulator never imports).
INSTALL_HINT = "pip install 'rewardkit[router]' && pip install --no-deps vidur==0.0.26"

if find_spec("vidur") is None:
    raise ImportError("the Vidur request router needs the Vidur simulator, which is not installed; "
                      f"install it with: {INSTALL_HINT}", name="vidur")
