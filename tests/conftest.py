pytest_plugins = ["actorrt.testing"]
