from lecritique.cli.main import app

# Guarded: vLLM's engine core is a spawned process that re-imports the main module.
if __name__ == "__main__":
    app()
