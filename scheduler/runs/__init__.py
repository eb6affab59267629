"""A run of a handler: its context (``current_run()``), its result and progress, its retry
policy, and its tracing span."""
