"""Tasks for the CLI tests."""

from tickwork.scheduler import App

app = App()


@app.task
def greet(name: str, times: int = 1) -> None:
    print(f"hello {name}" * times)


@app.task(retries=0)
def explode() -> None:
    raise RuntimeError("kaboom")


@app.task(keep_result=True)
def total(numbers: list[int]) -> dict[str, int]:
    return {"total": sum(numbers)}
