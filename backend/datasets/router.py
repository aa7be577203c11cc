"""HTTP for datasets: the catalogue and CSV uploads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from backend.datasets import service, upload
from backend.datasets.schemas import DatasetList, UploadRead
from backend.deps import SettingsDep, WriteGuard

router = APIRouter(prefix="/datasets", tags=["datasets"])

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": list(upload.REQUIRED),
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "a CSV file"},
                        "name": {"type": "string", "pattern": service.NAME.pattern, "maxLength": 40},
                        "label": {"type": "string", "minLength": 1, "description": "the label column"},
                        "user_id": {
                            "type": "string",
                            "description": "the column of user ids, for user-level DP (optional)",
                        },
                    },
                }
            }
        },
    }
}
UPLOAD_ERRORS: dict[int | str, dict[str, Any]] = {
    409: {"description": "an upload of this name exists"},
    413: {"description": "the file is over the server's upload limit"},
    422: {"description": "a field is invalid or the csv loader refuses the file; `detail[].loc` names it"},
}


@router.get("", response_model=DatasetList)
def list_datasets(settings: SettingsDep) -> Any:
    """Every registered dataset, whether it is available here, and the uploaded CSV files."""
    return service.catalogue(settings)


@router.post(
    "",
    status_code=201,
    response_model=UploadRead,
    responses=UPLOAD_ERRORS,
    dependencies=[WriteGuard],
    openapi_extra=UPLOAD_BODY,
)
async def upload_dataset(request: Request, settings: SettingsDep) -> Any:
    """Store an uploaded CSV (multipart fields file, name, label, optional user_id) once the csv
    loader accepts it; a spec then names it as `{"name": "csv", "options": {"upload": name}}`."""
    with service.staging(settings) as folder:
        form = await upload.receive(request, target=folder / "upload.csv", limit=settings.max_upload_bytes)
        return await run_in_threadpool(service.store_upload, settings, form=form)
