"""The client CLI (`a2a`, the `cli` extra): an A2A client for people and scripts.

`transport.py` the HTTP (JSON-RPC calls and SSE streams over httpx, errors as one line),
`session.py` the A2A operations in the version the card offers (1.0 or 0.3, answers in
1.0's shapes), `credentials.py` Google ID tokens, `render.py` what is printed and saved,
`cli.py` the commands. No function imports this package: `infra.stage` leaves it out of
the deployed code, and its dependencies out of the functions' requirements.
"""
