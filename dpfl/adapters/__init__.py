"""Adapters from other DP training tools to `dpfl.track`: each turns what the tool records about its
releases into our ledger's events, so the dashboard re-accounts that tool's runs like its own.

Each adapter is an optional extra (`pip install "dpfl-explorer[opacus]"`) and imports its tool
only where it has to, so `dpfl` imports without any of them. The Opacus adapter imports none: it
reads the accountant history a `PrivacyEngine` keeps. The Flower adapter (`dpfl.adapters.flower`,
the ``flower`` extra) is a Flower Strategy wrapping yours, so importing it imports flwr.
"""

__all__: list[str] = []
