from lecritique.cli.main import app

app()
