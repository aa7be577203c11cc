"""Privacy budgets per dataset: admission at submit, settlement at the end."""

from backend.budgets.service import exists, reserve, settle

__all__ = ["exists", "reserve", "settle"]
