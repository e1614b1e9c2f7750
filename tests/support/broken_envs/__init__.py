"""Real broken environments for the doctor's tests: shared helpers in ``common``, one folder per
family (``cpu/``, ``cuda/``, ``gcc/``) holding its Dockerfile."""
