"""What a message and a task are: the message model and its ids, task wrappers and their
arguments, the registry of an app's tasks, and the header names a message may carry."""
