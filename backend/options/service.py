"""The options catalogue, generated from the dpfl registries (never written by hand).

Each entry's options come from the code that takes them: a model builder's and a partition
kind's keyword-only parameters, bounded by the RunSpec's schema (`PartitionSpec`, `UsersSpec`).
"""

from __future__ import annotations

import inspect
from typing import Any, get_args

from backend.options.schemas import AccountantOption, KindOption, ModelOption, Options
from dpfl.algorithms.base import NOTIONS
from dpfl.data.partition_kinds import KINDS
from dpfl.data.users import USER_KINDS
from dpfl.models import model_builder, registered_models
from dpfl.privacy.accountants import accountant_class, registered_accountants
from dpfl.spec import DatasetSpec, PartitionSpec, PrivacySpec, RunSpec, UsersSpec

__all__ = ["catalogue"]


def _first_line(obj: object) -> str:
    return (inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ").strip()


def _keyword_options(function: Any) -> dict[str, Any]:
    """Returns the keyword-only parameters of `function` with their defaults (None: required)."""
    return {
        p.name: None if p.default is inspect.Parameter.empty else p.default
        for p in inspect.signature(function).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def _models() -> list[ModelOption]:
    out = []
    for name in registered_models():
        builder = model_builder(name)
        options = {k: list(v) if isinstance(v, tuple) else v for k, v in _keyword_options(builder).items()}
        out.append(
            ModelOption(
                name=name,
                description=_first_line(builder),
                takes_hidden="hidden" in options,
                options=options,
            )
        )
    return out


def _schema_options(model: type, names: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
    properties = model.model_json_schema()["properties"]
    return {name: properties[name] for name in names}


def _partition_kinds() -> list[KindOption]:
    return [
        KindOption(
            name=name,
            description=_first_line(KINDS[name]),
            # a kind takes the options its split function declares; PartitionSpec bounds them
            options={
                option: schema | {"default": default}
                for (option, default), schema in zip(
                    _keyword_options(KINDS[name]).items(),
                    _schema_options(PartitionSpec, list(_keyword_options(KINDS[name]))).values(),
                    strict=True,
                )
            },
        )
        for name in KINDS
    ]


def _user_kinds() -> list[KindOption]:
    return [
        KindOption(
            name=name,
            description=USER_KINDS[name].description,
            options=_schema_options(UsersSpec, USER_KINDS[name].options),
        )
        for name in USER_KINDS
    ]


def _accountants() -> list[AccountantOption]:
    out = []
    for name in registered_accountants():
        cls = accountant_class(name)
        if cls.data_dependent:
            headline = "never: its ε is computed from private data; shown beside the headline, labelled"
        elif cls.approximates:
            headline = (
                "only for plans it accounts exactly (e.g. no Poisson-sampled Gaussians); the server "
                "refuses it as a run's accountant otherwise, naming `privacy.accountant`"
            )
        else:
            headline = "always: a sound, data-independent bound for the releases it supports"
        out.append(
            AccountantOption(
                name=name,
                description=cls.description,
                data_dependent=cls.data_dependent,
                approximates=cls.approximates,
                headline_always=not (cls.data_dependent or cls.approximates),
                headline=headline,
            )
        )
    return out


def catalogue() -> Options:
    """Returns the models, partition kinds, user kinds, accountants and notions a run may name."""
    return Options(
        models=_models(),
        partition_kinds=_partition_kinds(),
        user_kinds=_user_kinds(),
        accountants=_accountants(),
        default_accountant=PrivacySpec.model_fields["accountant"].default,
        calibrations=list(get_args(PrivacySpec.model_fields["calibration"].annotation)),
        notions=list(NOTIONS),
        spec_defaults={
            "rounds": RunSpec.model_fields["rounds"].default,
            "dataset.silos": DatasetSpec.model_fields["silos"].default,
            "seed": RunSpec.model_fields["seed"].default,
        },
    )
