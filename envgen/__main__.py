from envgen.cli.main import entrypoint

entrypoint()
