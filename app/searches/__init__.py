"""Plan searches: submit (``POST /v1/searches``), follow, cancel, read the ranked plans.

A search is a queue row; workers (``app.workers``) claim it and run the study. Nothing here
runs a search inside a request.
"""
