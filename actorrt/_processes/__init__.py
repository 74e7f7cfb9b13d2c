"""Processes: the scheduler that owns the broker, the worker pool and the fork server,
worker processes and their main, process actors, proxies, the router and the dispatch of
messages between processes."""
