"""Privacy accounting: events, accountants, calibration and the ε ledger."""

from dpfl.privacy.accountants import make_accountant, registered_accountants
from dpfl.privacy.calibration import calibrate_noise_multiplier, epsilon, sgd_event
from dpfl.privacy.ledger import Ledger, LedgerEntry

__all__ = [
    "Ledger",
    "LedgerEntry",
    "calibrate_noise_multiplier",
    "epsilon",
    "make_accountant",
    "registered_accountants",
    "sgd_event",
]
