"""The API's local launcher: each experiment is `lecritique run` in a session that outlives the API."""
