"""A plugin module (`DPFL_PLUGINS=tests.audited_plugin`) of two private algorithms: one declares
its audit coverage through the plugin interface (`Algorithm.audit_coverage`), one declares none."""

from dpfl.algorithms import ALGORITHMS
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD
from dpfl.audit.coverage import Coverage, all_records
from dpfl.audit.neighbours import record_neighbours


@ALGORITHMS.register("plugin_mbsgd")
class PluginMinibatchSGD(ISRLMinibatchSGD):
    """ISRL-DP minibatch SGD under another name, audited as a record-level DP-SGD."""

    audit_coverage = Coverage(record_neighbours, all_records)


@ALGORITHMS.register("plugin_unaudited")
class PluginUnaudited(ISRLMinibatchSGD):
    """The same mechanism, with no audit coverage declared."""
