"""Real broken CUDA-toolchain environments (Docker) for tests/doctor/test_broken_envs_cuda.py:
the Dockerfile here (two targets: ``cuda`` and ``cpu-torch``) and :mod:`.images`, which makes its
build context, builds the images and runs commands in containers of them."""
