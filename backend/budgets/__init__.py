"""Privacy budgets per dataset: admission at submit, settlement at the end."""

from backend.budgets.service import budget_name, check_bounded, covering, reserve, secure, settle

__all__ = ["budget_name", "check_bounded", "covering", "reserve", "secure", "settle"]
