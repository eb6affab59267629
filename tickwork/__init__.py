"""The ``tickwork`` command line. It sits on top of ``scheduler``, ``workers`` and
``triggers``; nothing imports it."""
