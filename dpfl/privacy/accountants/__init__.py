"""Accountants, selectable by name: rdp, pate, pld, gdp, group (see `registered_accountants`)."""

from dpfl.privacy.accountants.base import (
    ACCOUNTANTS,
    Accountant,
    accountant_class,
    headline_problem,
    make_accountant,
    registered_accountants,
)
from dpfl.privacy.accountants.gdp import GDPAccountant, gdp_delta, gdp_epsilon, gdp_mu
from dpfl.privacy.accountants.group import GroupAccountant
from dpfl.privacy.accountants.pld import PLDAccountant
from dpfl.privacy.accountants.rdp import DEFAULT_ORDERS, PATEAccountant, RDPAccountant

__all__ = [
    "ACCOUNTANTS",
    "DEFAULT_ORDERS",
    "Accountant",
    "GDPAccountant",
    "GroupAccountant",
    "PATEAccountant",
    "PLDAccountant",
    "RDPAccountant",
    "accountant_class",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "headline_problem",
    "make_accountant",
    "registered_accountants",
]
