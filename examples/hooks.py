"""Hooks: one extension point for what should happen around every message.

python -m examples.hooks
tickwork worker -A examples.hooks --duration 3

Two hooks: ``Compress`` stores every body zlib-compressed (a codec: the worker, ``app.get``
and the CLI read it back transparently), and ``Outcomes`` prints how each run ended.
A hook overrides only the steps it needs; an app without hooks runs none.
"""

from __future__ import annotations

import zlib

from tickwork import App, Hook, RunInfo


class Compress(Hook):
    """Bodies stored compressed (deterministic, so a re-sent keyed message is still
    recognised as the same)."""

    def encode_body(self, body: bytes) -> bytes:
        return zlib.compress(body, 6)

    def decode_body(self, body: bytes) -> bytes:
        return zlib.decompress(body)


class Outcomes(Hook):
    """Prints each settled run (in the worker)."""

    def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
        print(
            f"  {run.task.rsplit('.', 1)[-1]} {run.message_id}: {outcome} in {duration_ms:.1f} ms"
        )


app = App(hooks=[Compress(), Outcomes()])


@app.task
def summarize(text: str) -> int:
    return len(text.split())


def main() -> None:
    handle = summarize.delay("the quick brown fox " * 50)
    stored = app.get(id=handle)
    assert stored is not None
    print("enqueued", handle, "with", len(stored.message.args[0]), "characters of text")
    app.close()


if __name__ == "__main__":
    main()
