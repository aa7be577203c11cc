"""The dataset loaders; importing this package registers every one of them."""

from dpfl.data.loaders import (
    adult,
    bundled,
    cifar,
    creditcard,
    csv_table,
    digit_domains,
    femnist,
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
    "creditcard",
    "csv_table",
    "digit_domains",
    "femnist",
    "heart",
    "mnist",
    "svhn",
    "synthetic",
    "usps",
]
