from processkit.cli.main import entry

entry()
