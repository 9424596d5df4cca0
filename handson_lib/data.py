"""Placeholder until the data module lands."""


def add_prepare_arguments(parser):
    pass
