"""Privacy budgets per dataset: admission at submit, settlement at the end."""

from backend.budgets.service import budget_name, exists, reserve, settle

__all__ = ["budget_name", "exists", "reserve", "settle"]
