"""The dataset loaders; importing this package registers every one of them."""

from dpfl.data.loaders import adult, bundled, csv_table, heart, mnist, synthetic

__all__ = ["adult", "bundled", "csv_table", "heart", "mnist", "synthetic"]
