"""envgen: resolve, lock, build and verify distributed deep learning environments.

The library is ``envgen.api`` (one function per pipeline stage, typed requests and results);
the command line is ``envgen.cli``. The stages, in import order (a package imports only the
ones before it): facts → resolve → lock → image → results → verify → evidence; harvest and
ci read facts; api calls the stages; cli calls api.
"""

__version__ = "0.1.0"  # pyproject.toml reads it from here ([tool.hatch.version])

__all__ = ["__version__"]
