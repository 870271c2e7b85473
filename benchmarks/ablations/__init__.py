"""The paper's ablations (Tables 3-5) at a scale a user can rerun: see `study.py`."""
