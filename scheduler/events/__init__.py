"""Events as triggers: subscriptions, emit and its fan-out, and waits for an event."""
