"""From a call to a stored message: validating and building it, its options checked,
writing it within its queue's bound, and what the producer API reports back."""
