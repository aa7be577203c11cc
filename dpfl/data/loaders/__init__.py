"""The dataset loaders; importing this package registers every one of them."""

from dpfl.data.loaders import (
    adult,
    bundled,
    cifar,
    csv_table,
    digit_domains,
    heart,
    mnist,
    svhn,
    synthetic,
    usps,
)

__all__ = [
    "adult",
    "bundled",
    "cifar",
    "csv_table",
    "digit_domains",
    "heart",
    "mnist",
    "svhn",
    "synthetic",
    "usps",
]
