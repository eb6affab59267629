"""Task classes, as in Astyanax: options as class attributes, one instance per message.

python -m examples.task_classes
tickwork worker -A examples.task_classes --burst
"""

from __future__ import annotations

from tickwork import App

app = App()


class Reindex(app.Task):  # type: ignore[name-defined,misc]
    queue = "indexing"
    retries = 2
    timeout = 120

    def run(self, index: str, full: bool = False) -> None:
        print(f"  -> reindex {index} ({'full' if full else 'incremental'})", flush=True)


def main() -> None:
    print(Reindex.delay("users"))
    print(Reindex.delay("orders", full=True))
    app.close()


if __name__ == "__main__":
    main()
