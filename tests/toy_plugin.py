"""A plugin module (`DPFL_PLUGINS=tests.toy_plugin`): importing it registers the toy algorithm."""

from tests.toys import register

register()
