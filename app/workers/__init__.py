"""Search workers: claim queued searches, run their Optuna studies, store the ranked plans.

A search is a row with a status, a lease and a heartbeat (``app.orm.SearchRow``). A worker claims
one (``repository.claim_next``: ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a conditional
``UPDATE`` on SQLite), renews the lease and writes progress from a heartbeat thread
(``lease.LeaseKeeper``), and runs ``search.run_search`` against Optuna RDB storage in the same
database under the study name ``autopar-search-<id>``. A worker that dies stops renewing; once
the lease expires another worker claims the search and the study continues where it stopped, so
no finished trial (and no plan) is lost.

``service.SearchWorker`` is the loop; ``autopar worker`` runs it as a process and the API runs
one in a thread (``embedded.EmbeddedWorker``) unless ``AUTOPAR_EMBEDDED_WORKER=false``.
"""
