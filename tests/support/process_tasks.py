"""Tasks for the process-pool test (imported by each pool process)."""

from tickwork.scheduler import App

app = App()


@app.task
def square(n: int) -> int:
    return n * n


@app.task
def crash() -> None:
    1 / 0  # noqa: B018


@app.task
async def async_square(n: int) -> int:
    import asyncio

    await asyncio.sleep(0)
    return n * n


@app.task(keep_result=True)
def cube(n: int) -> int:
    from tickwork.scheduler import current_run

    current_run().progress(1.0, "computed in a pool process")
    return n * n * n


@app.task(rate_limit="10/60s")
def answer(prompt: str) -> None:
    from tickwork.scheduler import current_run

    current_run().charge(9)  # the tokens the answer took, counted from the pool process
