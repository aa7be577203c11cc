"""Audits of a run's first round: queued like runs, executed by the worker (`dpfl.audit_run`)."""
