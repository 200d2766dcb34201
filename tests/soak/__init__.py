"""The chaos soak (`make soak`, issue 27): the stack (stack.py), the load (load.py), the faults
(faults.py), the webhook receiver (receiver.py) and the ledger (ledger.py); __main__.py runs
them in turn."""
