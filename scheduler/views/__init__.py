"""What operators read and steer besides schedules: queues (``app.queues``), workers'
activity and presence, and the poison store's filters."""
