"""A POST that creates a run once per `Idempotency-Key`, for our runs and external ones alike."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Response
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.models import Run

__all__ = ["created_once"]


def created_once(
    response: Response, session: Session, *, find: Callable[[], Run | None], create: Callable[[], Run]
) -> tuple[Run, bool]:
    """Returns (the run, whether this request created it): the one an earlier POST with the key
    made (`find`, answered with `Idempotent-Replayed: true`), else `create()`'s, committed before
    the answer. Of two concurrent POSTs with one key, the first to commit wins and the other
    answers with its run (the key is unique, so the second insert fails)."""

    def replayed() -> Run | None:
        run = find()
        if run is not None:
            response.headers["Idempotent-Replayed"] = "true"
        return run

    if (earlier := replayed()) is not None:
        return earlier, False
    try:
        run = create()
        session.commit()  # a worker must find the row before its message
    except IntegrityError:
        session.rollback()
        if (earlier := replayed()) is None:
            raise
        return earlier, False
    return run, True
