"""Webhooks: a search with a ``callback_url`` POSTs a signed payload when it ends.

- ``signing``: the ``Autopar-Signature`` scheme and ``verify`` for receivers (stdlib only).
- ``payload``: the events and the body.
- ``outbox``: the delivery row written with the search's end, in the same transaction.
- ``sender`` / ``dispatcher``: the workers' side: claim, sign, POST, log, back off, retry.
- ``service`` / ``router``: the delivery log in the API.

Importing this package imports nothing else, so ``from app.webhooks.signing import verify``
stays light for receivers.
"""
