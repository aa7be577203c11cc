"""Datasets and uploads as the API shows them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["DatasetList", "DatasetRead", "UploadClass", "UploadRead"]


class DatasetRead(BaseModel):
    name: str = Field(description="registry key, used as `dataset.name` in a RunSpec")
    description: str
    num_classes: int | None = Field(description="None when it depends on the data (csv)")
    natural_silos: int | None
    license: str
    source: str
    options: dict[str, Any] = Field(description="the loader's options and their defaults")
    available: bool = Field(description="whether its files are on this server (always for bundled data)")
    unavailable_reason: str | None = Field(description="which files are missing and where they go")


class UploadClass(BaseModel):
    name: str = Field(description="the label column's value")
    count: int = Field(description="rows of this class (train and test)")


class UploadRead(BaseModel):
    name: str
    label: str = Field(description="the label column")
    user_id: str | None = Field(None, description="the column of user ids (user-level DP), or none")
    num_rows: int
    num_classes: int
    classes: list[UploadClass] = Field(
        default_factory=list, description="each class by its value, with its rows; empty for older uploads"
    )
    columns: list[str]
    filename: str | None = Field(description="the file name the client sent")
    size_bytes: int
    uploaded_at: str
    spec_dataset: dict[str, Any] = Field(
        description="the `dataset` block that uses this upload in a RunSpec, by its name (add `silos`, "
        "`partition`)"
    )


class DatasetList(BaseModel):
    datasets: list[DatasetRead]
    uploads: list[UploadRead]
