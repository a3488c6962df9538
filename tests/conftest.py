import os

# Tests never draw progress bars, and torch reductions stay reproducible.
os.environ.setdefault("ICLR_LAB_PROGRESS", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
