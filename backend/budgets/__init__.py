"""Privacy budgets per dataset: admission at submit, settlement at the end."""

from backend.budgets.service import reserve, settle

__all__ = ["reserve", "settle"]
