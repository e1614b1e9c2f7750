"""The ``envgen`` command line. Only this package prints or exits."""
