"""The Vidur side (the only package that imports Vidur): env config, profiles and predictor, scheduler registration, the Gymnasium env and its reward context."""
