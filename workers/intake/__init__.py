"""Intake: claiming due messages (the consumer and its flow control), parking them in the
timing wheel until due, holding them (leases kept by heartbeat) and reading abort
requests."""
