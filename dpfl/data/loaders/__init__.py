"""The dataset loaders; importing this package registers every one of them."""

from dpfl.data.loaders import adult, bundled, cifar, csv_table, heart, mnist, synthetic

__all__ = ["adult", "bundled", "cifar", "csv_table", "heart", "mnist", "synthetic"]
